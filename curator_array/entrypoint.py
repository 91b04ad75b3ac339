"""The container/job entrypoint: SLURM environment in, one shard run out.

It decides everything the library below must not guess: the logical shard
(``SLURM_ARRAY_TASK_ID + SHARD_INDEX_OFFSET``), the total (``TOTAL_SHARDS`` or
``SLURM_ARRAY_TASK_COUNT``), the minimum, and the Ray client (one node → a private head;
several → one cluster over the job's nodes). It exports the ``NEMO_CURATOR_SLURM_ARRAY_*``
variables, prints why it decided so, and runs ``curator-array run`` with the remaining
arguments. Its exit code is the job's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from .errors import ConfigError
from .jobenv import JobEnvironment, env_int
from .sharding import (
    MINIMUM_SHARD_INDEX_VAR,
    SHARD_INDEX_VAR,
    TOTAL_SHARDS_VAR,
    sharding_enabled,
)


def array_environment(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The sharding variables to export, and one line of reasoning per decision."""
    if not sharding_enabled(env):
        return {}, ["sharding disabled by NEMO_CURATOR_SLURM_ARRAY_ENABLED"]
    task_id = env_int(env, "SLURM_ARRAY_TASK_ID", minimum=0)
    offset = env_int(env, "SHARD_INDEX_OFFSET", minimum=0)
    total = env_int(env, "TOTAL_SHARDS", minimum=1)
    minimum = env_int(env, "MINIMUM_SHARD_INDEX", minimum=0)
    if task_id is None:
        if offset or total is not None:
            raise ConfigError(
                "SHARD_INDEX_OFFSET/TOTAL_SHARDS are set but this is not a SLURM array task "
                "(no SLURM_ARRAY_TASK_ID); submit with sbatch --array=..."
            )
        return {}, ["not an array task: every source task runs as one implicit shard"]
    reasons = []
    count = env_int(env, "SLURM_ARRAY_TASK_COUNT", minimum=1)
    if total is None:
        low = env_int(env, "SLURM_ARRAY_TASK_MIN", minimum=0)
        high = env_int(env, "SLURM_ARRAY_TASK_MAX", minimum=0)
        if offset:
            raise ConfigError(
                f"SHARD_INDEX_OFFSET={offset} needs TOTAL_SHARDS: a windowed submission cannot "
                "know the run's total from the size of one window"
            )
        if low is not None and high is not None and count is not None and high - low + 1 != count:
            raise ConfigError(
                f"the array has gaps ({count} tasks between {low} and {high}), as in a retry: "
                "set TOTAL_SHARDS to the original run's total (curator-array retry --format fields prints it)"
            )
        if count is None:
            raise ConfigError("neither TOTAL_SHARDS nor SLURM_ARRAY_TASK_COUNT is set")
        total = count
        reasons.append(f"total {total} from SLURM_ARRAY_TASK_COUNT (TOTAL_SHARDS unset)")
    else:
        reasons.append(f"total {total} from TOTAL_SHARDS")
    shard = task_id + (offset or 0)
    reasons.insert(0, f"logical shard {shard} = SLURM_ARRAY_TASK_ID {task_id} + SHARD_INDEX_OFFSET {offset or 0}")
    reasons.append(f"minimum shard index {minimum or 0}")
    wanted = {SHARD_INDEX_VAR: str(shard), TOTAL_SHARDS_VAR: str(total), MINIMUM_SHARD_INDEX_VAR: str(minimum or 0)}
    for name, value in wanted.items():
        given = env.get(name)
        if given not in (None, "") and given.strip() != value:
            raise ConfigError(
                f"{name}={given} conflicts with the submit variables, which give {value}; "
                f"unset {name} or fix SHARD_INDEX_OFFSET/TOTAL_SHARDS/MINIMUM_SHARD_INDEX"
            )
    return wanted, reasons


def main(argv: list[str] | None = None) -> int:
    from .cli import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        job = JobEnvironment.from_env(os.environ)
        exported, reasons = array_environment(os.environ)
    except ConfigError as exc:
        print(f"curator-array entrypoint: error: {exc}", file=sys.stderr)
        return exc.exit_code
    os.environ.update(exported)
    cluster = "slurm" if job.num_nodes > 1 else "local"
    where = (
        f"SLURM job {job.job_id} (array job {job.array_job_id}, task {job.array_task_id}, restart {job.restart_count})"
        if job.in_slurm else "outside SLURM"
    )
    role = (
        f"{job.num_nodes} nodes → one Ray cluster over them (SlurmRayClient); this is node {job.node_id}"
        f" ({'head + driver' if job.is_driver else 'worker'})"
        if cluster == "slurm" else "1 node → a private Ray head on this node (RayClient)"
    )
    print(f"curator-array entrypoint: {where} on {job.node_name or job.hostname}", file=sys.stderr)
    for line in [role, *reasons]:
        print(f"  {line}", file=sys.stderr)
    return cli_main(["run", "--cluster", cluster, *args])


if __name__ == "__main__":
    sys.exit(main())
