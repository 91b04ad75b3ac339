"""Labelling every document with the run's label models (fastText classifiers of several
labels: topics, formats, educational levels).

``--label-model NAME=FILE`` gives each document ``NAME`` (the best label, without fastText's
``__label__`` prefix) and ``NAME_prob`` (its probability); with ``--label-top-k K`` above 1,
also ``NAME_labels`` and ``NAME_probs``, the K best, best first. Nothing is dropped: the
labels are there for selecting and mixing later. An actor stage, as the quality scorer is:
each actor loads the models once, in its own memory.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..classify.label_settings import LabelSettings
from ..core.file_digests import file_digest
from .classifiers import ModelStage
from .columns import taken_field
from .defaults import TEXT_FIELD
from .tasks import DocumentBatch, Task


class LabelScorer(ModelStage):
    """Adds each label model's columns (``LabelSettings.columns``); keeps every row."""

    name = "label_model"
    pinned = ("digests", "top_k", "text_field")
    drops_rows = False

    def __init__(self, paths: Mapping[str, str], top_k: int = 1, text_field: str = TEXT_FIELD,
                 digests: Mapping[str, str] | None = None):
        self.paths, self.top_k = dict(paths), top_k
        self.digests = dict(digests) if digests is not None else {name: file_digest(p) for name, p in self.paths.items()}
        super().__init__(text_field)

    @classmethod
    def of(cls, settings: LabelSettings, text_field: str) -> LabelScorer:
        return cls(settings.paths, settings.top_k, text_field, settings.digests)

    @property
    def settings(self) -> LabelSettings:
        return LabelSettings(self.digests, self.paths, self.top_k)

    def writes(self) -> tuple[str, ...]:
        return tuple(column for name in self.paths for column in self.settings.columns(name))

    def process(self, task: DocumentBatch) -> Task:
        taken = taken_field(task, self.writes(), self.stage_name,
                            ": name the label model otherwise (--label-model OTHER=...), or drop the field")
        return taken or super().process(task)

    def score(self, table, text):
        import pyarrow as pa
        import pyarrow.compute as pc

        from ..classify.model import top_labels

        texts = pc.fill_null(text, "").to_pylist()
        for name, model in self.models.items():
            best = [top_labels(model, t, self.top_k) for t in texts]
            table = table.append_column(name, pa.array([b[0][0] for b in best], pa.string()))
            table = table.append_column(f"{name}_prob", pa.array([b[0][1] for b in best], pa.float64()))
            if self.top_k > 1:
                table = table.append_column(f"{name}_labels", pa.array([[label for label, _ in b] for b in best],
                                                                       pa.list_(pa.string())))
                table = table.append_column(f"{name}_probs", pa.array([[p for _, p in b] for b in best],
                                                                      pa.list_(pa.float64())))
        return table, {}
