"""The built-in web pipelines, each a list of steps (``pipelines.steps``), and their options."""

from __future__ import annotations

from .commoncrawl import COMMONCRAWL
from .dclm import DCLM
from .fineweb import FINEWEB
from .steps import WebPipeline, gathered_options

PIPELINES: tuple[WebPipeline, ...] = (COMMONCRAWL, FINEWEB, DCLM)


def step_options() -> list:
    """The options of every built-in web pipeline's steps, each marked with the pipelines that use it."""
    return gathered_options(PIPELINES)
