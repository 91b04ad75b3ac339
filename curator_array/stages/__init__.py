"""Stages: the units a pipeline is made of, and the tasks that flow between them.

Here: the stage API (``base``, ``tasks``, ``apply``), the sources (``partition`` for files,
``urls`` for URL lists) with the run's frozen ``listing``, the reader and writer base
classes (``io``), filters, downloads, and the web stages (``web``). Stages know nothing of
Ray: the executor (``execution``) adapts them, so each can be tested as plain Python.

May import: core, text, tokens, helpers, classify, decont, storage. Never Ray. (text: words and n-grams;
tokens: the tokenizer; helpers: their allocator; classify: the quality models; decont: the
eval-set index and its matching.)
"""

from importlib import import_module

_EXPORTS = {
    "FilePartitioningStage": "partition",
    "ProcessingStage": "base",
    "RayStageSpec": "base",
    "Resources": "base",
    "SourceStage": "base",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """The stage API on demand: importing ``stages.defaults`` must not import pyarrow."""
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
