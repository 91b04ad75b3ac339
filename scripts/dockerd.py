#!/usr/bin/env python3
"""A throwaway Docker daemon for image builds, tests and CI.

    scripts/dockerd.py start     # prints: export DOCKER_HOST=unix://...
    scripts/dockerd.py stop

No bridge network and no iptables rules, so it changes nothing on the host's network.
Its data (and so the build cache) lives under ``--dir`` (default /var/tmp/curator-array-docker,
kept between runs), and it is stopped through the pid it recorded. The Debian package is
installed when missing (root only). Builds need host networking: see container/build_image.py.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from slurm_cluster import pid_alive  # this directory is on sys.path when a script of it runs

DEFAULT_DIR = Path(os.environ.get("CURATOR_ARRAY_DOCKER_DIR", "/var/tmp/curator-array-docker"))


def socket_path(root: Path) -> Path:
    return root / "docker.sock"


def running_pid(root: Path) -> int | None:
    return pid_alive(root / "dockerd.pid")


def ensure_installed() -> None:
    if shutil.which("dockerd"):
        return
    if os.geteuid() != 0:
        raise RuntimeError("dockerd is not installed; as root run: apt-get install -y docker.io")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "docker.io"], check=True, env=env)


def answers(root: Path) -> bool:
    import socket

    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(2)
            sock.connect(str(socket_path(root)))
            sock.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return b"OK" in sock.recv(4096)
    except OSError:
        return False


def start(root: Path) -> str:
    ensure_installed()
    root.mkdir(parents=True, exist_ok=True)
    running = running_pid(root)
    if not (running and answers(root)):
        if not running:
            (root / "dockerd.pid").unlink(missing_ok=True)  # stale: dockerd refuses to start while its pid is alive
        log = open(root / "dockerd.log", "ab")
        subprocess.Popen(
            [
                "dockerd", "--iptables=false", "--ip6tables=false", "--bridge=none",
                "--storage-driver=overlay2", f"--data-root={root / 'data'}", f"--exec-root={root / 'exec'}",
                f"--pidfile={root / 'dockerd.pid'}", f"--host=unix://{socket_path(root)}",
            ],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while not answers(root):
            if time.monotonic() > deadline:
                tail = (root / "dockerd.log").read_text(errors="replace").splitlines()[-10:]
                raise RuntimeError("dockerd did not answer within 30s:\n" + "\n".join(tail))
            time.sleep(0.2)
    return f"unix://{socket_path(root)}"


def stop(root: Path) -> None:
    pid = running_pid(root)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and running_pid(root):
        time.sleep(0.2)
    if running_pid(root):
        os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            print(f"export DOCKER_HOST={start(args.dir)}")
        else:
            stop(args.dir)
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"dockerd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
