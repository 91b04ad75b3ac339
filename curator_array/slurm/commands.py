"""The one door to SLURM's command-line tools, plus hostlist expansion.

Every ``sbatch``/``squeue``/``scontrol``/``scancel`` call goes through ``slurm_command``,
so a missing tool or a failing call always produces the same kind of clear error.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from ..core.errors import CuratorArrayError


class SlurmCommandError(CuratorArrayError):
    pass


def slurm_command(args: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60.0) -> str:
    tool = args[0]
    if shutil.which(tool, path=(env or {}).get("PATH")) is None and shutil.which(tool) is None:
        raise SlurmCommandError(
            f"{tool} not found: run this on a SLURM login or compute node "
            "(or install the client: apt-get install slurm-client)"
        )
    try:
        result = subprocess.run(list(args), capture_output=True, text=True, env=None if env is None else dict(env), timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SlurmCommandError(f"{' '.join(args)} did not answer within {timeout:.0f}s") from None
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise SlurmCommandError(f"{' '.join(args)} failed: {message[-1] if message else f'exit {result.returncode}'}")
    return result.stdout


_BRACKET = re.compile(r"^(?P<prefix>[^\[]*)\[(?P<ranges>[^\]]+)\](?P<rest>.*)$")


def _split_top_level(expression: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in expression:
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p]


def _expand_one(item: str) -> list[str]:
    match = _BRACKET.match(item)
    if not match:
        return [item]
    prefix, rest = match["prefix"], match["rest"]
    names = []
    for piece in match["ranges"].split(","):
        low, _, high = piece.partition("-")
        width = len(low)
        for number in range(int(low), int(high or low) + 1):
            names += [f"{prefix}{number:0{width}d}{suffix}" for suffix in _expand_one(rest)] if rest else [f"{prefix}{number:0{width}d}"]
    return names


def expand_hostlist(expression: str) -> list[str]:
    """``gpu-[01,03-05],login1`` → ``[gpu-01, gpu-03, gpu-04, gpu-05, login1]`` (SLURM's order)."""
    try:
        return [name for item in _split_top_level(expression.strip()) for name in _expand_one(item)]
    except ValueError:
        raise SlurmCommandError(f"cannot read node list {expression!r}") from None


def hostnames(nodelist: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Node names of a job, via ``scontrol show hostnames`` when available."""
    if shutil.which("scontrol"):
        try:
            return slurm_command(["scontrol", "show", "hostnames", nodelist], env).split()
        except SlurmCommandError:
            pass
    return expand_hostlist(nodelist)


def submit(
    script: str, args: Sequence[str] = (), env: Mapping[str, str] | None = None, script_args: Sequence[str] = ()
) -> str:
    """``sbatch --parsable [args] script [script_args]``; returns the job id."""
    out = slurm_command(["sbatch", "--parsable", *args, script, *script_args], env)
    return out.strip().split(";")[0]


def max_array_size(env: Mapping[str, str] | None = None) -> int:
    for line in slurm_command(["scontrol", "show", "config"], env).splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MaxArraySize":
            return int(value.strip())
    raise SlurmCommandError("scontrol show config did not report MaxArraySize")
