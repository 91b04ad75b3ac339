"""The container/job entrypoint: SLURM environment in, one shard run out.

It decides what the library below must not guess, from the environment and through
``JobContext`` (the same resolver ``curator-array run`` uses): the logical shard and the
Ray client (one node → a private head; several → one cluster over the job's nodes). It
prints why it decided so, then runs ``curator-array run`` in this process with the
remaining arguments, handing it the resolved context. Its exit code is the job's.
"""

from __future__ import annotations

import os
import sys

from ..core.errors import ConfigError
from ..slurm.job_context import JobContext


def explain(context: JobContext) -> list[str]:
    """What the entrypoint prints before it runs: where, which Ray client, which shard."""
    job = context.job
    where = (
        f"SLURM job {job.job_id} (array job {job.array_job_id}, task {job.array_task_id}, restart {job.restart_count})"
        if job.in_slurm else "outside SLURM"
    )
    if context.cluster != "slurm":
        role = "1 node → a private Ray head on this node (RayClient)"
    elif job.node_known:
        role = (f"{job.num_nodes} nodes → one Ray cluster over them (SlurmRayClient); this is node {job.node_id}"
                f" ({'head + driver' if job.is_driver else 'worker'})")
    else:
        role = (f"{job.num_nodes} nodes → one Ray cluster over them (SlurmRayClient); no SLURM_NODEID here (a "
                "container that hides the task's variables): the first node in the rendezvous is the head + driver")
    return [f"curator-array entrypoint: {where} on {job.node_name or job.hostname}",
            *(f"  {line}" for line in (role, *context.reasons))]


def main(argv: list[str] | None = None) -> int:
    from . import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        context = JobContext.from_env(os.environ)
    except ConfigError as exc:
        print(f"curator-array entrypoint: error: {exc}", file=sys.stderr)
        return exc.exit_code
    for line in explain(context):
        print(line, file=sys.stderr)
    return cli_main(["run", "--cluster", context.cluster, *args], context=context)


if __name__ == "__main__":
    from .process_exit import exit_process

    exit_process(main())
