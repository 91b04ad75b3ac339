"""Pipelines: a source and the stages after it, built from the run's options.

``pipeline`` holds ``Pipeline`` (its fingerprint is what the run contract pins, the later
phases' settings with it) and how ``--pipeline NAME|MODULE:FUNCTION`` is loaded;
``options`` what a pipeline builder is given; ``filters`` the default pipeline's filters,
each with its options; ``commoncrawl``, ``fineweb`` and ``dclm`` the built-in web pipelines,
lists of ``steps`` (each stage with its options), gathered in ``web``.

May import: core, stages, formats, dedup, tokens, helpers, storage.
"""

from importlib import import_module

_EXPORTS = {"Pipeline": "pipeline", "PipelineOptions": "options", "default_pipeline": "pipeline",
            "load_pipeline": "pipeline"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """Imported on demand: ``options`` is light, ``pipeline`` imports the stages (pyarrow)."""
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
