"""Decontamination as a stage: every document checked against the run's eval-set index just
before it is written.

Each worker process loads the index once (checked against its pinned digest) and looks
up every n-gram of a batch at once (``decont.matching``). ``drop`` removes a document with
any hit; ``cut`` removes each hit with GPT-3's margins and drops what is left too short or
cut too often. A removed document is counted once, as ``decontaminate.<task>``, the first
eval task it hits in the eval files' order; every hit is tallied per task for the manifest and the report, and with
``--keep-removed`` the removed documents keep ``contaminated_task`` and
``contaminated_ngram``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..text.language import DEFAULT_LANGUAGE
from .base import ProcessingStage
from .defaults import TEXT_FIELD
from .process_state import PerProcess
from .tasks import DocumentBatch, Task

TASK_FIELD, NGRAM_FIELD = "contaminated_task", "contaminated_ngram"
ID_FIELDS = ("id", "url")  # what names a document in the report, the first a batch has


def _load_index(stage: Decontaminator):
    from ..core.errors import ConfigError
    from ..core.file_digests import file_digest
    from ..decont.index import NGramIndex

    path = Path(stage.index_path)
    if file_digest(path) != stage.index_digest:
        raise ConfigError(f"decontamination index {path} is not the one the run pinned: it is truncated or was replaced")
    return NGramIndex.from_bytes(path.read_bytes(), str(path))


def _load_languages(stage: Decontaminator):
    from .web.languages import language_rules

    return language_rules(stage.quality_settings)


class Decontaminator(ProcessingStage):
    name = "decontaminate"
    pinned = ("index_digest", "ngrams", "mode", "overlap", "text_field")  # the index by its digest, not its path
    drops_rows = True
    index = PerProcess(_load_index, key=lambda stage: (stage.index_path, stage.index_digest))
    languages = PerProcess(_load_languages, key=lambda stage: stage.quality_settings)

    def __init__(self, index_path: str | Path, index_digest: str, ngrams: int, mode: str = "drop",
                 overlap: bool = False, text_field: str = TEXT_FIELD, quality_settings: str | None = None):
        self.index_path, self.index_digest = str(index_path), index_digest
        self.ngrams, self.mode, self.overlap = ngrams, mode, overlap
        self.text_field, self.quality_settings = text_field, quality_settings
        super().__init__()

    @classmethod
    def of(cls, settings: Any, options: Any) -> Decontaminator:
        """The stage of a run's ``DecontSettings`` and pipeline options."""
        return cls(settings.index_path, settings.index_digest, settings.ngrams, settings.mode, settings.overlap,
                   options.text_field, options.quality_settings)

    def reads(self) -> tuple[str, ...]:
        return (self.text_field,)

    def writes(self) -> tuple[str, ...]:
        return (self.text_field,) if self.mode == "cut" else ()

    def setup(self) -> None:
        _ = self.index

    def segmenters(self, table) -> list[tuple[str, str]]:
        from .columns import row_languages
        from .web.languages import for_language

        return [(for_language(self.languages, code).segmenter, code) for code in row_languages(table, DEFAULT_LANGUAGE)]

    @staticmethod
    def document_ids(task: DocumentBatch) -> list[str]:
        table = task.table
        for name in ID_FIELDS:
            if name in table.column_names:
                values = table.column(name).to_pylist()
                return [str(v) if v is not None else f"{task.task_id}:{row}" for row, v in enumerate(values)]
        part = f":{task.part}" if task.part is not None else ""
        return [f"{task.task_id}{part}:{row}" for row in range(table.num_rows)]

    def process(self, task: DocumentBatch) -> Task:
        import pyarrow as pa
        import pyarrow.compute as pc

        from ..decont.matching import cut, find_hits, tally
        from .columns import missing_field
        from .removed import removed_rows

        table = task.table
        if table.num_rows == 0:
            return task
        missing = missing_field(task, self.text_field, self.stage_name, "to decontaminate")
        if missing is not None:
            return missing
        texts = pc.fill_null(table.column(self.text_field).cast(pa.string()), "").combine_chunks()
        index = self.index
        segmenters = self.segmenters(table)
        hits = find_hits(texts, segmenters, index)
        if not len(hits):
            return task
        firsts = hits.first_per_document(index.task_of(hits.records))
        reasons: list[str | None] = [None] * table.num_rows
        characters: dict[int, int] = {}
        new_texts: dict[int, str] = {}
        for document, hit in firsts.items():
            task_name = index.tasks[index.record_tasks[hits.records[hit]]]
            if self.mode == "cut":
                result, _ = cut(texts[document].as_py(), segmenters[document], index)
                characters[document] = result.characters_cut
                if result.text is not None:
                    if result.characters_cut:
                        new_texts[document] = result.text
                    continue
            else:
                characters[document] = len(texts[document].as_py())
            reasons[document] = f"{self.stage_name}.{task_name}"
        ids = self.document_ids(task)
        counters = replace(task.counters, contamination=task.counters.contamination + tally(hits, index, ids, firsts,
                                                                                           characters))
        for reason in filter(None, reasons):
            counters = counters.with_dropped(reason, 1)
        if new_texts:
            column = [new_texts.get(row, text) for row, text in enumerate(texts.to_pylist())]
            table = table.set_column(table.schema.get_field_index(self.text_field), self.text_field,
                                     pa.array(column, table.schema.field(self.text_field).type))
        kept = pa.array([reason is None for reason in reasons])
        audit = table
        if self.keep_removed:
            audit = table.append_column(TASK_FIELD, pa.array(
                [index.tasks[index.record_tasks[hits.records[firsts[row]]]] if row in firsts else None
                 for row in range(table.num_rows)], pa.string()))
            audit = audit.append_column(NGRAM_FIELD, pa.array(
                [hits.spell(firsts[row]) if row in firsts else None for row in range(table.num_rows)], pa.string()))
        done = removed_rows(self, replace(task, counters=counters), audit, kept, reasons)
        if self.keep_removed:
            done = replace(done, table=done.table.drop_columns([TASK_FIELD, NGRAM_FIELD]))
        return done
