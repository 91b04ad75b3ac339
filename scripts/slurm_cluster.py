#!/usr/bin/env python3
"""A throwaway SLURM cluster on this host, for tests, the demo and CI.

    scripts/slurm_cluster.py start [--nodes 3] [--dir D] [--max-array-size 1001]
    scripts/slurm_cluster.py env      # prints: export SLURM_CONF=...
    scripts/slurm_cluster.py stop

It installs the Debian packages when they are missing (root only). It writes a config
under ``--dir``, starts munged (unless one already answers), slurmctld and one slurmd per
node (``slurmd -N nodeK``, each on its own port), and waits until every node is idle.
Starting an already running cluster with the same settings does nothing. Stopping
signals only the pids this script recorded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_DIR = Path(os.environ.get("CURATOR_ARRAY_SLURM_DIR", "/tmp/curator-array-slurm"))
PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
CTLD_PORT, FIRST_SLURMD_PORT = 16817, 17001


class ClusterError(RuntimeError):
    pass


def run(*command: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), check=check, capture_output=True, text=True, **kwargs)


def ensure_packages() -> None:
    if all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    if os.geteuid() != 0:
        raise ClusterError(f"SLURM is not installed; as root run: apt-get install -y {' '.join(PACKAGES)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run("apt-get", "update", "-qq", env=env)
    run("apt-get", "install", "-y", "-qq", *PACKAGES, env=env)


def pid_alive(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{pid}/stat").exists() else "Z"
    return None if state == "Z" else pid


def munge_works() -> bool:
    if not shutil.which("munge"):
        return False
    encoded = subprocess.run(["munge", "-n"], capture_output=True)
    if encoded.returncode:
        return False
    return subprocess.run(["unmunge"], input=encoded.stdout, capture_output=True).returncode == 0


def ensure_munge(root: Path) -> None:
    if munge_works():
        return
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_bytes(os.urandom(1024))
    shutil.chown(key, "munge", "munge")
    key.chmod(0o400)
    for directory in (Path("/run/munge"), Path("/var/log/munge"), Path("/var/lib/munge")):
        directory.mkdir(parents=True, exist_ok=True)
        shutil.chown(directory, "munge", "munge")
        directory.chmod(0o755 if directory.name == "munge" and directory.parent.name == "run" else 0o700)
    pid_file = root / "run" / "munged.pid"
    run("runuser", "-u", "munge", "--", "munged", "--force")
    for _ in range(50):
        if munge_works():
            pids = run("pgrep", "-u", "munge", "-x", "munged", check=False).stdout.split()
            if pids:
                pid_file.write_text(pids[-1] + "\n")
            return
        time.sleep(0.1)
    raise ClusterError("munged did not start (see /var/log/munge/munged.log)")


def node_names(nodes: int) -> list[str]:
    return [f"node{i}" for i in range(1, nodes + 1)]


def write_config(root: Path, nodes: int, max_array_size: int, cpus: int) -> Path:
    host = socket.gethostname().split(".")[0]
    for sub in ("etc", "state", "log", "run", "spool"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    lines = [
        "ClusterName=curatorarray",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={CTLD_PORT}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/run/slurmctld.pid",
        f"SlurmdPidFile={root}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={root}/log/jobcomp.txt",
        "JobAcctGatherType=jobacct_gather/none",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "ReturnToService=2",
        f"MaxArraySize={max_array_size}",
        "MinJobAge=600",
        "KillWait=10",
        "InactiveLimit=0",
        "SlurmdTimeout=30",
        "SchedulerParameters=sched_interval=1",
    ]
    for index, name in enumerate(node_names(nodes)):
        lines.append(
            f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={FIRST_SLURMD_PORT + index} "
            f"CPUs={cpus} RealMemory=8000 State=UNKNOWN"
        )
    lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    config = root / "etc" / "slurm.conf"
    text = "\n".join(lines) + "\n"
    if not config.exists() or config.read_text() != text:
        config.write_text(text)
    for name in node_names(nodes):
        (root / "spool" / name).mkdir(parents=True, exist_ok=True)
    return config


def client_env(config: Path) -> dict[str, str]:
    return dict(os.environ, SLURM_CONF=str(config))


def wait_idle(config: Path, names: list[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        result = run("sinfo", "-h", "-N", "-o", "%N %t", check=False, env=client_env(config))
        last = result.stdout + result.stderr
        states = dict(line.split() for line in result.stdout.splitlines() if len(line.split()) == 2)
        if all(states.get(name, "").startswith(("idle", "mix", "alloc")) for name in names):
            return
        for name, state in states.items():
            if state.startswith(("down", "drain", "drng", "unk")) and "*" not in state:
                run("scontrol", "update", f"nodename={name}", "state=resume", check=False, env=client_env(config))
        time.sleep(0.5)
    raise ClusterError(f"nodes not idle after {timeout:.0f}s: {last.strip()}")


def start(root: Path, nodes: int, max_array_size: int, cpus: int) -> Path:
    ensure_packages()
    root.mkdir(parents=True, exist_ok=True)
    (root / "run").mkdir(exist_ok=True)
    settings = root / "run" / "settings"
    wanted = f"{nodes} {max_array_size} {cpus}"
    running = pid_alive(root / "run" / "slurmctld.pid")
    if running and (not settings.exists() or settings.read_text() != wanted):
        stop(root)  # other settings: restart from scratch
        running = None
    ensure_munge(root)
    config = write_config(root, nodes, max_array_size, cpus)
    env = client_env(config)
    if not running:
        run("slurmctld", "-c", "-f", str(config), env=env)
    for name in node_names(nodes):
        if not pid_alive(root / "run" / f"slurmd-{name}.pid"):
            run("slurmd", "-f", str(config), "-N", name, env=env)
    settings.write_text(wanted)
    wait_idle(config, node_names(nodes))
    return config


def stop(root: Path) -> None:
    """Signal the daemons whose pid files we wrote (munged only if we started it)."""
    pid_files = sorted((root / "run").glob("slurmd-*.pid")) + [root / "run" / "slurmctld.pid", root / "run" / "munged.pid"]
    pids = [pid for pid in (pid_alive(f) for f in pid_files if f.exists()) if pid]
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() and _not_zombie(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if Path(f"/proc/{pid}").exists() and _not_zombie(pid):
            os.kill(pid, signal.SIGKILL)
    for pid_file in pid_files:
        pid_file.unlink(missing_ok=True)


def _not_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["start", "stop", "env"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs each node advertises")
    parser.add_argument("--max-array-size", type=int, default=1001)
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            config = start(args.dir, args.nodes, args.max_array_size, args.cpus)
            print(f"export SLURM_CONF={config}")
        elif args.command == "env":
            print(f"export SLURM_CONF={args.dir / 'etc' / 'slurm.conf'}")
        else:
            stop(args.dir)
    except (ClusterError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or ""
        print(f"slurm_cluster: {exc} {detail.strip()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
