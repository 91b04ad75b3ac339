"""What a stage needs installed to run: a Python module (an extra), or files an install step
writes (FineWeb's URL lists). A stage names them (``ProcessingStage.needs``); a run and a
submission check every stage's before a Ray cluster starts, and refuse with one line naming
the piece and the command that installs it, instead of failing inside a worker.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

WEB_EXTRAS = "pip install 'curator-array[web]'"
TOKENIZE_EXTRAS = "pip install 'curator-array[tokenize]'"


@dataclass(frozen=True)
class Requirement:
    """``name`` is what a user knows it as; ``install`` the command that installs it. It is
    present when ``module`` can be imported and ``path`` exists (those given)."""

    name: str
    install: str
    module: str | None = None
    path: str | None = None

    @property
    def present(self) -> bool:
        if self.module is not None and importlib.util.find_spec(self.module) is None:
            return False
        return self.path is None or Path(self.path).exists()


def module(name: str, install: str = WEB_EXTRAS) -> Requirement:
    return Requirement(name, install, module=name)


def first_missing(stages: Iterable) -> str | None:
    """One line naming the first missing piece a stage needs and how to install it, or None."""
    for stage in stages:
        for requirement in stage.needs():
            if not requirement.present:
                return (f"stage {stage.stage_name} needs {requirement.name} (not installed here): "
                        f"run {requirement.install}")
    return None
