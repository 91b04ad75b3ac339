"""Execution on Ray: private clusters per array element, and stages run on Ray Data.

``ray_cluster`` starts and stops one node's processes (``ray_internals.launcher`` runs in
each node's process); ``clients`` and ``slurm_client`` own a cluster for one driver;
``ray_data`` turns a list of stages into Ray Data operators, sized by ``pools``. What is
borrowed from Ray's private API lives in ``ray_internals`` alone, used only through its
``__init__`` and only on the Ray releases the tests passed on.

May import: core, slurm, stages.
"""
