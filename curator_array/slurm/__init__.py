"""SLURM: the one door to its commands, the job environment, and the array submissions.

``commands`` runs sbatch/squeue/scontrol; ``jobenv`` parses a job's variables once;
``job_context`` turns them into this process's logical shard; ``submit`` splits a run
into ``sbatch --array`` windows and records them; ``sites`` renders the per-cluster job
scripts (jinja2).

May import: core. Never Ray or pyarrow.
"""
