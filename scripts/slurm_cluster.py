#!/usr/bin/env python3
"""A throwaway SLURM cluster on this host, for tests, the demo and CI.

    scripts/slurm_cluster.py start [--nodes 3] [--dir D] [--max-array-size 1001]
                                   [--pyxis auto|required|off] [--squashfuse]
    scripts/slurm_cluster.py env      # prints: export SLURM_CONF=... (and CURATOR_ARRAY_PYXIS=...)
    scripts/slurm_cluster.py pyxis-mode create|squashfuse     # no restart needed
    scripts/slurm_cluster.py stop

It installs the Debian packages when they are missing (root only). It writes a config
under ``--dir``, starts munged (unless one already answers), slurmctld and one slurmd per
node (``slurmd -N nodeK``, each on its own port), and waits until every node is idle.
Starting an already running cluster with the same settings does nothing. Stopping
signals only the pids this script recorded, then removes the enroot containers its nodes
left and unmounts whatever is still mounted under ``--dir``.

SLURM's own OCI containers (``srun --container=BUNDLE``) run through runc: the cluster's
``oci.conf`` names it, with a state directory per user under ``--dir``, and passes the job's
environment in (``CreateEnvFile``). runc comes from Debian (installed with SLURM, as root).

pyxis (the SPANK plugin behind ``srun --container-image``) and enroot are loaded through
``PlugStackConfig`` only where a site installed them: ``spank_pyxis.so`` in
``CURATOR_ARRAY_PYXIS_PLUGIN`` or a usual plugin directory, and ``enroot`` on the PATH (or
beside the plugin's prefix). Nothing here builds them. Every node gets its own enroot state
through a wrapper first in its slurmd's PATH: pyxis names a step's container
``pyxis_<job>.<step>`` in the data dir, which nodes sharing one disk would race on.
``--squashfuse`` sets pyxis's ``use_squashfuse=1`` (mount the image instead of unpacking it
for every step).
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
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DIR = Path(os.environ.get("CURATOR_ARRAY_SLURM_DIR", "/tmp/curator-array-slurm"))
CRED_EXPIRE_S = 10
PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge", "runc"]
CTLD_PORT, FIRST_SLURMD_PORT = 16817, 17001
PYXIS_PLUGIN_VARIABLE = "CURATOR_ARRAY_PYXIS_PLUGIN"
INSTALLED_PLUGIN_DIRS = ("/usr/local/lib/slurm", "/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/slurm",
                         "/usr/lib64/slurm", "/usr/lib/aarch64-linux-gnu/slurm-wlm")
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ClusterError(RuntimeError):
    pass


def run(*command: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), check=check, capture_output=True, text=True, **kwargs)


def ensure_packages() -> None:
    if all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "sbatch", "munged", "runc")):
        return
    if os.geteuid() != 0:
        raise ClusterError(f"SLURM is not installed; as root run: apt-get install -y {' '.join(PACKAGES)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run("apt-get", "update", "-qq", env=env)
    run("apt-get", "install", "-y", "-qq", *PACKAGES, env=env)


def pid_alive(pid_file: Path) -> int | None:
    """The pid in one of our pid files while that process is alive and still the program the
    file is named after (``slurmd-node1.pid``: slurmd). A pid file outlives a daemon killed
    with its session, and the kernel soon gives the number to another process: that one must
    be neither taken for ours nor signalled."""
    try:
        pid = int(pid_file.read_text().split()[0])
        program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except (OSError, ValueError, IndexError):
        return None
    if Path(program.decode(errors="replace")).name != pid_file.stem.split("-")[0]:
        return None
    return pid if _not_zombie(pid) else None


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


@dataclass(frozen=True)
class Pyxis:
    """Where enroot and the pyxis plugin are: ``bin`` holds ``enroot``, ``plugin`` the .so."""

    bin: Path
    plugin: Path
    how: str


def installed_pyxis() -> Pyxis | None:
    """The plugin the variable names, else one in a usual plugin directory, with an enroot on
    the PATH or in the plugin's prefix; None when either is missing."""
    named = os.environ.get(PYXIS_PLUGIN_VARIABLE)
    candidates = [Path(named)] if named else [Path(d) / "spank_pyxis.so" for d in INSTALLED_PLUGIN_DIRS]
    plugin = next((p for p in candidates if p.is_file()), None)
    if plugin is None:
        return None
    beside = plugin.parent.parent.parent / "bin" / "enroot"  # PREFIX/lib/slurm/spank_pyxis.so
    enroot = shutil.which("enroot") or (str(beside) if beside.is_file() else None)
    if enroot is None:
        return None
    return Pyxis(Path(enroot).parent, plugin, f"installed on this host ({enroot}, {plugin})")


def missing_pyxis() -> str:
    """What is missing for pyxis, in one line (tests print it when they skip)."""
    places = os.environ.get(PYXIS_PLUGIN_VARIABLE) or ", ".join(INSTALLED_PLUGIN_DIRS)
    return (f"pyxis is not installed here (no spank_pyxis.so in {places}, or no enroot on the PATH); "
            f"set {PYXIS_PLUGIN_VARIABLE} to an installed plugin")


def find_pyxis(mode: str) -> Pyxis | None:
    if mode == "off":
        return None
    found = installed_pyxis()
    if found is None and mode == "required":
        raise ClusterError(missing_pyxis())
    return found


def write_oci_conf(root: Path) -> None:
    """runc for ``srun --container``, with a state directory per user (any user's steps create
    theirs) and the job's environment passed in; slurmstepd reads it at every step."""
    state = root / "runc"
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o1777)
    runc = f"runc --root={state}/%u"
    container = "%n.%u.%j.%s.%t"
    (root / "etc" / "oci.conf").write_text(
        f'RunTimeQuery="{runc} state {container}"\n'
        f'RunTimeKill="{runc} kill -a {container} SIGTERM"\n'
        f'RunTimeDelete="{runc} delete --force {container}"\n'
        f'RunTimeRun="{runc} run {container} -b %b"\n'
        "CreateEnvFile=true\n"
    )


def node_enroot_wrapper(root: Path, name: str, pyxis: Pyxis) -> Path:
    """A per-node ``enroot`` that keeps the node's containers apart from the other nodes'."""
    node = root / "nodes" / name
    bin_dir = node / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for sub in ("runtime", "data", "cache", "tmp"):
        (node / "enroot" / sub).mkdir(parents=True, exist_ok=True)
        (node / "enroot" / sub).chmod(0o1777)  # jobs of any user create their own subdirectory
    wrapper = bin_dir / "enroot"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'export ENROOT_RUNTIME_PATH="{node}/enroot/runtime/user-$(id -u)"\n'
        f'export ENROOT_DATA_PATH="{node}/enroot/data/user-$(id -u)"\n'
        f'export ENROOT_CACHE_PATH="{node}/enroot/cache/group-$(id -g)"\n'
        f'export ENROOT_TEMP_PATH="{node}/enroot/tmp"\n'
        f'exec "{pyxis.bin / "enroot"}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return bin_dir


def write_plugstack(root: Path, plugin: Path, squashfuse: bool) -> None:
    """The pyxis line; slurmstepd reads it at every step, so a change needs no restart."""
    runtime = root / "pyxis-runtime"
    runtime.mkdir(parents=True, exist_ok=True)
    options = f"runtime_path={runtime}" + (" use_squashfuse=1" if squashfuse else "")
    (root / "etc" / "plugstack.conf").write_text(f"required {plugin} {options}\n")


def set_pyxis_mode(root: Path, squashfuse: bool) -> None:
    """Switch a running cluster between unpacking images per step (pyxis's default) and
    mounting them (``use_squashfuse=1``)."""
    plugstack = root / "etc" / "plugstack.conf"
    if not plugstack.exists():
        raise ClusterError(f"no pyxis in the cluster at {root}")
    write_plugstack(root, Path(plugstack.read_text().split()[1]), squashfuse)
    settings = root / "run" / "settings"
    if settings.exists():
        fields = settings.read_text().split()
        settings.write_text(" ".join([*fields[:-1], str(squashfuse)]))


def node_names(nodes: int) -> list[str]:
    return [f"node{i}" for i in range(1, nodes + 1)]


def config_text(root: Path, nodes: int, max_array_size: int, cpus: int, pyxis: Pyxis | None) -> str:
    host = socket.gethostname().split(".")[0]
    lines = [
        "ClusterName=curatorarray",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={CTLD_PORT}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        # A requeued job may start again only once its old credential has expired (120 s by default).
        f"AuthInfo=cred_expire={CRED_EXPIRE_S}",
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
        "SlurmdTimeout=15",  # a stopped slurmd is declared failed after this long
        "SchedulerParameters=sched_interval=1",
    ]
    for index, name in enumerate(node_names(nodes)):
        lines.append(
            f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={FIRST_SLURMD_PORT + index} "
            f"CPUs={cpus} RealMemory=8000 State=UNKNOWN"
        )
    lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    if pyxis is not None:
        lines.append(f"PlugStackConfig={root / 'etc' / 'plugstack.conf'}")
    return "\n".join(lines) + "\n"


def write_config(root: Path, text: str, nodes: int, pyxis: Pyxis | None = None, squashfuse: bool = False) -> Path:
    for sub in ("etc", "state", "log", "run", "spool"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    if pyxis is not None:
        write_plugstack(root, pyxis.plugin, squashfuse)
    write_oci_conf(root)
    config = root / "etc" / "slurm.conf"
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


def start(root: Path, nodes: int, max_array_size: int, cpus: int, pyxis_mode: str = "auto",
          squashfuse: bool = False) -> tuple[Path, Pyxis | None]:
    ensure_packages()
    root.mkdir(parents=True, exist_ok=True)
    (root / "run").mkdir(exist_ok=True)
    pyxis = find_pyxis(pyxis_mode)
    settings = root / "run" / "settings"
    wanted = f"{nodes} {max_array_size} {cpus} {pyxis.plugin if pyxis else 'no-pyxis'} {squashfuse}"
    running = pid_alive(root / "run" / "slurmctld.pid")
    config = root / "etc" / "slurm.conf"
    text = config_text(root, nodes, max_array_size, cpus, pyxis)
    stale = not config.exists() or config.read_text() != text
    if running and (stale or not settings.exists() or settings.read_text() != wanted):
        stop(root)  # other settings: restart from scratch
        running = None
    ensure_munge(root)
    config = write_config(root, text, nodes, pyxis, squashfuse)
    env = client_env(config)
    if not running:
        run("slurmctld", "-c", "-f", str(config), env=env)
    for name in node_names(nodes):
        if not pid_alive(root / "run" / f"slurmd-{name}.pid"):
            node_env = dict(env)
            if pyxis is not None:
                # pyxis runs `enroot` (and enroot its helpers) through slurmstepd's PATH.
                node_env["PATH"] = f"{node_enroot_wrapper(root, name, pyxis)}:{pyxis.bin}:{BASE_PATH}"
            run("slurmd", "-f", str(config), "-N", name, env=node_env)
    settings.write_text(wanted)
    wait_idle(config, node_names(nodes))
    return config, pyxis


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
    remove_containers(root)


def mounts_under(root: Path) -> list[str]:
    """Mount points below ``root``, deepest first (``/proc/self/mountinfo``, octal escapes decoded)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point == str(root) or point.startswith(f"{root}/"):
            found.append(point)
    return sorted(found, key=len, reverse=True)


def remove_containers(root: Path) -> None:
    """What pyxis and enroot may have left on our nodes: mounts (squashfuse) and containers."""
    for point in mounts_under(root):
        if run("umount", point, check=False).returncode != 0:
            run("umount", "-l", point, check=False)
    for data in (root / "nodes").glob("*/enroot/data/*"):
        shutil.rmtree(data, ignore_errors=True)
    for runtime in (root / "nodes").glob("*/enroot/runtime/*"):
        shutil.rmtree(runtime, ignore_errors=True)


def _not_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["start", "stop", "env", "pyxis-mode"])
    parser.add_argument("mode", nargs="?", choices=["create", "squashfuse"],
                        help="pyxis-mode: unpack images per step (create, pyxis's default) or mount them")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs each node advertises")
    parser.add_argument("--max-array-size", type=int, default=1001)
    parser.add_argument("--pyxis", choices=["auto", "required", "off"], default="auto",
                        help="load pyxis + enroot: when installed (auto), or fail without them (required)")
    parser.add_argument("--squashfuse", action="store_true", help="pyxis mounts images (use_squashfuse=1)")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            config, pyxis = start(args.dir, args.nodes, args.max_array_size, args.cpus, args.pyxis, args.squashfuse)
            print(f"export SLURM_CONF={config}")
            print(f"export CURATOR_ARRAY_PYXIS={'1' if pyxis else '0'}")
            print(f"# pyxis: {pyxis.how if pyxis else 'not loaded: ' + missing_pyxis()}", file=sys.stderr)
        elif args.command == "env":
            config = args.dir / "etc" / "slurm.conf"
            print(f"export SLURM_CONF={config}")
            loaded = config.exists() and "PlugStackConfig=" in config.read_text()
            print(f"export CURATOR_ARRAY_PYXIS={'1' if loaded else '0'}")
        elif args.command == "pyxis-mode":
            if not args.mode:
                parser.error("pyxis-mode needs create or squashfuse")
            set_pyxis_mode(args.dir, args.mode == "squashfuse")
        else:
            stop(args.dir)
    except (ClusterError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or ""
        print(f"slurm_cluster: {exc} {detail.strip()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
