"""A real Docker daemon (scripts/dockerd.py) and the image, built once per session.

Without a registry the build makes its base from Debian packages first, as `make image`
does; the image build reuses the daemon's layer cache, which lives outside the checkout.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
from typing import NamedTuple

import pytest

from tests.conftest import REPO, need

BASE_TAG = "curator-array-base:bookworm"
IMAGE_TAG = "curator-array:test"


def load_build_tool():
    spec = importlib.util.spec_from_file_location("build_image", REPO / "container" / "build_image.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
def sqsh(image, build_tool, tmp_path_factory):
    for tool, package in (("mksquashfs", "squashfs-tools"), ("unsquashfs", "squashfs-tools")):
        if not shutil.which(tool) and os.geteuid() == 0:
            subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True,
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        need(shutil.which(tool) is not None, f"{tool} is missing (apt-get install {package})")
    return build_tool.build_sqsh(image, None)


from tests.slurm.conftest import pyxis, slurm_cluster  # noqa: E402,F401  (the same session cluster)
