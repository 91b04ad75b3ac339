"""Scoring every document with the run's quality classifiers (fastText models), and keeping
those that score at least a threshold.

``--quality-model NAME=FILE`` (repeatable) gives each document a column ``NAME``: the
model's probability that the document is of ``--quality-label`` (``classify.model``: as DCLM
computes it). ``--quality-threshold NAME=T`` drops the documents scoring below ``T``, and
``NAME<=T`` those scoring above it (a score that means harm: toxicity, advertising), counted
as ``quality_model.NAME``. The models are pinned by their digests; each runs in the
stage's actors, loaded once per actor process, in its own memory. The phases that select the
best of the whole run from these scores (``--keep-top-fraction``, ``--quality-buckets``) are
``run.phases.quality``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..classify.model import DEFAULT_QUALITY_LABEL, worker_memory
from ..classify.settings import QualitySettings
from ..core.file_digests import file_digest
from .base import Resources
from .columns import taken_field
from .defaults import TEXT_FIELD
from .filters import FilterStage
from .process_state import PerProcess
from .requirements import Requirement, module
from .tasks import DocumentBatch, Task


def _load_models(stage: ModelStage) -> dict[str, Any]:
    from ..classify.model import load_model

    return {name: load_model(path) for name, path in stage.paths.items()}


class ModelStage(FilterStage):
    """An actor stage of fastText models (``paths`` by name): each actor loads them once, when
    it starts, in its own memory (never through the object store), and reserves that memory
    (a node runs no more actors than it holds)."""

    ray_stage_spec = {"is_actor_stage": True}
    models = PerProcess(_load_models, key=lambda stage: tuple(sorted(stage.paths.items())))
    paths: dict[str, str]

    @property
    def resources(self) -> Resources:
        return Resources(memory_bytes=worker_memory(self.paths.values()))

    def needs(self) -> tuple[Requirement, ...]:
        return (module("fasttext"),)

    def setup(self) -> None:
        _ = self.models


class QualityScorer(ModelStage):
    """Adds a column per model (its name) with the model's probability of the quality label,
    and drops documents below their ``thresholds`` or above their ``ceilings``."""

    name = "quality_model"
    pinned = ("digests", "label", "thresholds", "text_field")  # the models by their digests, not their paths
    pinned_unless = {**FilterStage.pinned_unless, "ceilings": {}}

    def __init__(self, paths: Mapping[str, str], label: str = DEFAULT_QUALITY_LABEL, binary: bool = True,
                 thresholds: Mapping[str, float] | None = None, text_field: str = TEXT_FIELD,
                 digests: Mapping[str, str] | None = None, ceilings: Mapping[str, float] | None = None):
        self.paths = dict(paths)
        self.digests = dict(digests) if digests is not None else {name: file_digest(p) for name, p in self.paths.items()}
        self.label, self.binary = label, binary
        self.thresholds, self.ceilings = dict(thresholds or {}), dict(ceilings or {})
        super().__init__(text_field)

    @classmethod
    def of(cls, settings: QualitySettings, text_field: str) -> QualityScorer:
        return cls(settings.paths, settings.label, settings.binary, settings.thresholds, text_field, settings.digests,
                   settings.ceilings)

    def writes(self) -> tuple[str, ...]:
        return tuple(self.paths)

    def process(self, task: DocumentBatch) -> Task:
        taken = taken_field(task, self.paths, self.stage_name,
                            ": name the quality model otherwise (--quality-model OTHER=...), or drop the field")
        return taken or super().process(task)

    def score(self, table, text):
        import pyarrow as pa
        import pyarrow.compute as pc

        from ..classify.model import quality_probabilities

        texts = pc.fill_null(text, "").to_pylist()
        rules = {}
        for name, model in self.models.items():
            scores = pa.array(quality_probabilities(model, texts, self.label, self.binary), pa.float64())
            table = table.append_column(name, scores)
            bounds = [pc.greater_equal(scores, self.thresholds[name])] if name in self.thresholds else []
            bounds += [pc.less_equal(scores, self.ceilings[name])] if name in self.ceilings else []
            if bounds:
                rules[name] = bounds[0] if len(bounds) == 1 else pc.and_(*bounds)
        return table, rules

