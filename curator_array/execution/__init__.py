"""Execution on Ray: private clusters per array element, and stages run on Ray Data.

``ray_cluster`` starts and stops one node's processes (``ray_launcher`` runs in each
node's process); ``clients`` and ``slurm_client`` own a cluster for one driver;
``ray_data`` turns a list of stages into Ray Data operators, sized by ``pools``.

May import: core, slurm, stages.
"""
