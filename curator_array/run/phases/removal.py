"""Dedup, phase 4: one element per curation shard, its files without the removed copies.

Each curated file is written into the output dir by the run's own output format
(``WriterStage.write_without``), so the visible output only ever holds deduplicated
documents, and a rerun writes the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.phase import SHARD, Counts, Phase, PhaseResult
from ...core.sharding import ShardRange
from ...pipelines.phase_settings import PhaseSettings
from .clusters import removed_file
from .curation import curated_files

if TYPE_CHECKING:
    from ..lifecycle import PhaseContext


@dataclass(frozen=True)
class RemovalCounts(Counts):
    rows_in: int = 0
    rows_out: int = 0
    removed: int = 0


class Removal(Phase):
    name = "removal"
    needs = ("clusters",)
    noun = SHARD
    counts = RemovalCounts
    added_by = "--dedup"

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return shards if settings.dedup is not None else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        import pyarrow.parquet as pq

        from ...formats import reader_for, writer_for

        table = pq.read_table(removed_file(context.layout, index))
        removed: dict[str, set[int]] = {}
        for file, row in zip(table["file"].to_pylist(), table["row"].to_pylist()):
            removed.setdefault(file, set()).add(row)
        writer, reader = writer_for(context.output_format, context.output_dir), reader_for(context.output_format)
        rows_in = rows_out = 0
        files = curated_files(context, index)
        for done, relative in enumerate(files):
            context.tick(done, len(files))
            rows, kept = writer.write_without(context.staged / relative, context.output_dir / relative,
                                              removed.get(relative, set()), reader)
            rows_in, rows_out = rows_in + rows, rows_out + kept
        return PhaseResult(RemovalCounts(rows_in, rows_out, rows_in - rows_out))
