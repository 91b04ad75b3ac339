"""container/build_image.py as a module: it is a script beside the Dockerfile, not in the package."""

from __future__ import annotations

import importlib.util

from tests.conftest import REPO


def load_build_tool():
    spec = importlib.util.spec_from_file_location("build_image", REPO / "container" / "build_image.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
