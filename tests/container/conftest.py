"""A real Docker daemon (scripts/dockerd.py) and the image, built once per session.

Without a registry the build makes its base from Debian packages first, as `make image`
does; the image build reuses the daemon's layer cache, which lives outside the checkout.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from curator_array.core.layout import CheckpointLayout
from tests.conftest import REPO, need
from tests.support.build_tool import load_build_tool

BASE_TAG = "curator-array-base:bookworm"
IMAGE_TAG = "curator-array:test"


@pytest.fixture(scope="session")
def docker_client():
    need(os.geteuid() == 0 or bool(os.environ.get("DOCKER_HOST")), "a Docker daemon needs root here")
    if not os.environ.get("DOCKER_HOST"):
        started = subprocess.run([sys.executable, str(REPO / "scripts" / "dockerd.py"), "start"], capture_output=True, text=True)
        need(started.returncode == 0, f"dockerd did not start: {started.stderr.strip()}")
        os.environ["DOCKER_HOST"] = started.stdout.strip().split("=", 1)[1]
    import docker

    client = docker.from_env(timeout=900)
    client.ping()
    return client


@pytest.fixture(scope="session")
def build_tool():
    return load_build_tool()


class BaseChoice(NamedTuple):
    tag: str
    said: str  # what the build printed while choosing


@pytest.fixture(scope="session")
def base_choice(docker_client, build_tool) -> BaseChoice:
    """The base `make image` picks with no base given: the registry's image, else the
    offline one (built now from packages unless already there)."""
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        tag = build_tool.choose_base(docker_client, None)
    sys.stdout.write(said.getvalue())
    return BaseChoice(tag, said.getvalue())


@pytest.fixture(scope="session")
def image(base_choice, build_tool):
    """Built as `make image` builds it, on the base chosen above."""
    build_tool.build_image(IMAGE_TAG, base_choice.tag)
    return IMAGE_TAG


@pytest.fixture(scope="session")
def sqsh(image, build_tool, request):
    """`make sqsh`'s file; after the OCI bundle where runc is at hand, so that both take the
    image's one export (``build_image.linked_bundle_rootfs``)."""
    for tool, package in (("mksquashfs", "squashfs-tools"), ("unsquashfs", "squashfs-tools")):
        if not shutil.which(tool) and os.geteuid() == 0:
            subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True,
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        need(shutil.which(tool) is not None, f"{tool} is missing (apt-get install {package})")
    if shutil.which("runc") or os.geteuid() == 0:
        request.getfixturevalue("oci_bundle")
    return build_tool.build_sqsh(image, None)


@pytest.fixture(scope="session")
def oci_bundle(image, build_tool):
    """The image as an OCI bundle (`make oci`), for SLURM's own `srun --container`."""
    if not shutil.which("runc") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-qq", "runc"], check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    need(shutil.which("runc") is not None, "runc is missing (apt-get install runc)")
    return build_tool.build_oci(image, None)


# Not under /tmp, so the paths mean the same inside a container (whose /tmp is its own).
WORK_ROOT = Path("/var/tmp/curator-array-tests")


@pytest.fixture
def work(tmp_path):
    """A test's own directory that containers see at the same path."""
    WORK_ROOT.mkdir(parents=True, exist_ok=True)
    WORK_ROOT.chmod(0o755)
    path = WORK_ROOT / Path(os.path.realpath(tmp_path)).name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def plain_user():
    """A non-root user made for this test module (removed afterwards)."""
    name = "curatortest"
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/bash", name], check=True)
    yield pwd.getpwnam(name)
    subprocess.run(["userdel", name], check=False)


# What every element of these tests runs with: small, for a 2-core host running other tests beside.
RUN_OPTIONS = ("--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress")


def sbatch_site(script: Path, work: Path, image: Path, out: Path, *args: str, env: dict | None = None,
                user: str | None = None, data: Path | None = None) -> str:
    """sbatch a rendered site script (its input ``data``, default ``work/in``), as ``user`` when
    given; sbatch options (``--array``, ``--nodes``) go before the script, the rest after it.
    Returns the job id."""
    variables = {"INPUT_DIR": str(data or work / "in"), "OUTPUT_DIR": str(out), "CONTAINER_IMAGE": str(image),
                 **(env or {})}
    options = [a for a in args if a.startswith(("--array", "--nodes"))]
    command = ["sbatch", "--parsable", f"--output={work}/slurm_%A_%a.out", *options, str(script),
               *[a for a in args if a not in options], *RUN_OPTIONS]
    if user:
        exported = [f"{k}={v}" for k, v in {**variables, "SLURM_CONF": os.environ["SLURM_CONF"]}.items()]
        command = ["runuser", "-u", user, "--", "env", "-C", str(work), *exported, *command]
    done = subprocess.run(command, capture_output=True, text=True, cwd=work, env=dict(os.environ, **variables))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def input_records(directory: Path) -> list[dict]:
    records = []
    for path in sorted(directory.iterdir()):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt") as handle:
            records += [json.loads(line) for line in handle if line.strip()]
    return records


def logs(work: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(work.glob("slurm_*.out")))


def manifests(out: Path) -> dict[int, dict]:
    return {int(p.stem.rsplit("_", 1)[1]): json.loads(p.read_text())
            for p in CheckpointLayout(out).completion_dir.glob("completed_slurm_array_*.json")}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


from tests.slurm.conftest import pyxis, slurm_cluster  # noqa: E402,F401  (the same session cluster)
