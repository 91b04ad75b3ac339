"""Dedup, phase 1: one element per curation shard, its documents' band keys.

The first element to start (once every curation shard is complete) freezes the run's list
of curated files, sorted by path: a document's identity is its file's index there and its
row (``dedup.keys``), the same however the run was sharded. Each of the shard's curated
files is then read in turn, a batch of its text and language at a time (memory: one batch,
never a file), and its documents' band keys (MinHash LSH, or one key of the normalised
text for exact dedup) go into one band file (``dedup.bandfile``), grouped by bucket
(``band_key % buckets``) and band, so a buckets element reads one band of its share at a
time and nothing else. At most ``FLUSH_ROWS`` rows wait in memory before they are spilled.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.arrays import format_array_expression
from ...core.errors import ConfigError, CuratorArrayError
from ...core.layout import CheckpointLayout
from ...core.phase import SHARD, Counts, Phase, PhaseResult
from ...core.records.phase import phase_manifests
from ...core.run_contract import read_run_config
from ...core.sharding import ShardRange
from ...pipelines.phase_settings import PhaseSettings
from .curation import curated_files

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from ...dedup.settings import DedupSettings
    from ..lifecycle import PhaseContext

LANGUAGE = "language"
FLUSH_ROWS = 1 << 18  # band-key rows held before they are spilled, sorted by bucket and band (~5 MB)
CURATED_FILES = "curated_files.parquet"
BAND_SUFFIX = ".bands"
BUCKETS_KEY = b"buckets"  # an earlier release's Parquet signatures: how many buckets its row groups are for


@dataclass(frozen=True)
class SignatureCounts(Counts):
    documents: int = 0


class Signatures(Phase):
    name = "signatures"
    needs = ("curation",)
    noun = SHARD
    counts = SignatureCounts
    added_by = "--dedup"  # each element needs every curation shard: identities index every curated file

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return shards if settings.dedup is not None else None

    def check(self, settings: PhaseSettings) -> None:
        if settings.dedup is not None and settings.dedup.against:
            against_signature_files(settings.dedup)

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        import numpy as np

        from ...dedup.keys import identities
        from ...formats import reader_for

        reader, field = reader_for(context.output_format), context.text_field
        dedup = context.settings.dedup
        split = Segmenting(context) if dedup.fuzzy else None
        every = CuratedFiles.of(context)

        def batches() -> Iterator[tuple[np.ndarray, pa.Array, list[tuple[str, str]] | None]]:
            files = curated_files(context, index)
            for done, relative in enumerate(files):
                context.tick(done, len(files))
                path, row, texts_seen = context.staged / relative, 0, False
                for table in reader.read_columns(str(path), (field, LANGUAGE)):
                    ids = identities(every.index(relative), np.arange(row, row + table.num_rows))
                    row += table.num_rows
                    texts_seen = texts_seen or table[field].null_count < table.num_rows
                    yield ids, texts_of(table, field, path), split.of(table) if split else None
                if row and not texts_seen:
                    raise CuratorArrayError(f"{path}: no field {field!r} to compare (--text-field names the text field)")

        documents = write_signatures(batches(), signatures_file(context.layout, index), dedup.fuzzy,
                                     dedup.bucket_count(context.run.shards.total))
        return PhaseResult(SignatureCounts(documents))


def signatures_file(layout: CheckpointLayout, shard: int) -> Path:
    """A shard's band file; an earlier release's Parquet file when that is what a run
    given with ``--dedup-against`` holds."""
    data = Signatures().layout_of(layout)
    path = data.data_path(shard, BAND_SUFFIX)
    legacy = data.data_path(shard, ".parquet")
    return legacy if not path.exists() and legacy.exists() else path


@dataclass(frozen=True)
class CuratedFiles:
    """The run's curated files, sorted by path, and the curation shard that wrote each: the
    frozen list identities index (written once, by the first signatures element)."""

    paths: tuple[str, ...]
    shards: np.ndarray  # the shard of each file

    def index(self, path: str) -> int:
        import bisect

        position = bisect.bisect_left(self.paths, path)
        if position == len(self.paths) or self.paths[position] != path:
            raise CuratorArrayError(f"{path} is not in the run's frozen list of curated files")
        return position

    @classmethod
    def of(cls, context: PhaseContext) -> CuratedFiles:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ...core.atomic import create_bytes_exclusive

        path = Signatures().layout_of(context.layout).data_dir / CURATED_FILES
        if not path.is_file():
            listed = sorted((name, shard) for shard in context.run.shards for name in curated_files(context, shard))
            buffer = pa.BufferOutputStream()
            pq.write_table(pa.table({"path": pa.array([name for name, _ in listed], pa.string()),
                                     "shard": pa.array([shard for _, shard in listed], pa.int64())}), buffer)
            path.parent.mkdir(parents=True, exist_ok=True)
            create_bytes_exclusive(path, buffer.getvalue().to_pybytes())  # another element may have been first
        table = pq.read_table(path)
        return cls(tuple(table["path"].to_pylist()), table["shard"].to_numpy())


class Segmenting:
    """How each document's words are split: by the segmenter the quality filters use for its
    language (its ``language`` field, else ``--dedup-language``), from the run's language table."""

    def __init__(self, context: PhaseContext):
        from ...stages.web.languages import language_settings

        self.table = language_settings(context.request.options.quality_settings)
        self.default = context.settings.dedup.language

    def of(self, table: pa.Table) -> list[tuple[str, str]]:
        import pyarrow as pa

        from ...stages.web.languages import for_language

        codes = (table[LANGUAGE].cast(pa.string()).to_pylist() if LANGUAGE in table.column_names
                 else [None] * table.num_rows)
        return [(for_language(self.table, code or self.default).tokenizer, code or self.default) for code in codes]


def texts_of(table: pa.Table, field: str, path: Path) -> pa.Array:
    """The text column of a curated file, as strings."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if field not in table.column_names:
        raise CuratorArrayError(f"{path}: no field {field!r} to compare (--text-field names the text field)")
    column = table[field]
    return (pc.cast(column, pa.string()) if column.type != pa.string() else column).combine_chunks()


def write_signatures(batches: Iterable[tuple[np.ndarray, pa.Array, list | None]], path: Path, settings,
                     buckets: int = 1) -> int:
    """The band keys of every batch's documents, in one band file (``dedup.bandfile``) of
    ``buckets`` buckets; returns how many documents."""
    from ...dedup.bandfile import BandFileWriter
    from ...dedup.lsh import signature_rows

    documents = 0
    with BandFileWriter(path, buckets, settings.bands if settings else 1, FLUSH_ROWS) as writer:
        for ids, texts, segmenters in batches:
            writer.add(signature_rows(ids, texts, settings, segmenters))
            documents += len(ids)
    return documents


def against_signature_files(settings: DedupSettings) -> list[tuple[Path, int]]:
    """The signature files of the earlier runs given with ``--dedup-against``, each with the
    source its documents take in this run (their number: they sort before this run's); a run
    that is missing, incomplete or made with other settings is refused (exit 2)."""
    from ...dedup.keys import THIS_RUN

    if len(settings.against) >= THIS_RUN:
        raise ConfigError(f"--dedup-against names {len(settings.against)} runs; at most {THIS_RUN - 1} can be read")
    files = []
    mine = settings.signature_settings()
    for number, checkpoint in enumerate(settings.against):
        layout = CheckpointLayout(checkpoint)
        if not layout.run_file.is_file():
            raise ConfigError(f"--dedup-against {checkpoint}: no run there")
        earlier = read_run_config(layout)
        theirs = PhaseSettings.of_fingerprint(earlier.pipeline).dedup
        if theirs is None or theirs.signature_settings() != mine:
            raise ConfigError(f"--dedup-against {checkpoint}: its signatures were made with "
                              f"{theirs.signature_settings() if theirs else 'no dedup'}, this run's with {mine}: "
                              "the settings must be equal to compare them")
        done = set(phase_manifests(Signatures().layout_of(layout), earlier.run_id))
        missing = [s for s in earlier.shards if s not in done]
        if missing:
            raise ConfigError(f"--dedup-against {checkpoint}: its signatures of shard(s) "
                              f"{format_array_expression(missing)} are not complete")
        files += [(signatures_file(layout, s), number) for s in earlier.shards]
    return files
