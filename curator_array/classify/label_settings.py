"""The run's label models, as the run options give them and the pipeline fingerprint pins
them (``label_model``): fastText classifiers whose answer is a label (a topic, a format, a
language), not one probability."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.errors import ConfigError
from ..core.file_digests import file_digest
from ..core.pinned_settings import PinnedSettings
from .settings import named

LABEL_MODELS = "label_model"  # the fingerprint key, and the option that adds the label models


@dataclass(frozen=True)
class LabelSettings(PinnedSettings):
    """The label models (``paths`` by name here; read back from ``run.json`` they are known by
    their ``digests`` alone) and how many of the best labels each document keeps (``top_k``)."""

    digests: dict[str, str]
    paths: dict[str, str] = field(default_factory=dict, compare=False)
    top_k: int = 1

    UNPINNED: ClassVar[tuple[str, ...]] = ("paths",)
    OPTION_DEFAULTS: ClassVar[dict[str, Any]] = {"models": ()}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.digests)

    def columns(self, name: str) -> tuple[str, ...]:
        """The columns model ``name`` writes."""
        return (name, f"{name}_prob") + ((f"{name}_labels", f"{name}_probs") if self.top_k > 1 else ())

    @classmethod
    def from_options(cls, given: Mapping[str, Any]) -> LabelSettings:
        """The settings the run options give, each model checked: a fastText file with at least
        ``top_k`` labels. ConfigError names what is wrong."""
        from .model import header_labels

        paths, top_k = named(given.get("models") or ()), given.get("top_k") or 1
        for name, path in paths.items():
            labels = header_labels(path)
            if len(labels) < top_k:
                raise ConfigError(f"--label-top-k {top_k}: --label-model {name}={path} has {len(labels)} "
                                  f"label{'s' * (len(labels) != 1)}")
        return cls({name: file_digest(path) for name, path in paths.items()}, paths, top_k)
