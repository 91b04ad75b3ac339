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

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.arrays import format_array_expression
from ...core.counts import Counts
from ...core.errors import ConfigError, CuratorArrayError
from ...core.layout import CheckpointLayout, PhaseLayout
from ...core.option_kinds import NONE
from ...core.options import RunOption
from ...core.phase import OUTPUT, SHARD, Phase, PhaseResult, PhaseSettings
from ...core.records.phase import phase_manifests
from ...core.run_contract import read_run_config
from ...core.sharding import ShardRange
from ...dedup.settings import STEPS, URL_PRIORITIES, DedupSettings
from ...storage.places import fetched, joined
from ...text.language import LANGUAGE_FIELD
from .layouts import CURATION, SIGNATURES, CuratedFiles, curated_files, signatures_file

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from ..lifecycle import PhaseContext

DEDUP = "dedup"
FLUSH_ROWS = 1 << 18  # band-key rows held before they are spilled, sorted by bucket and band (~5 MB)
BUCKETS_KEY = b"buckets"  # an earlier release's Parquet signatures: how many buckets its row groups are for

DEDUP_OPTIONS = (
    RunOption("dedup", "Remove duplicates across the whole run, as phases after curation, one or more steps "
              "(comma-separated, done in this order): urls (one document per normalised URL), then lines (CCNet's: a "
              "line seen before) or paragraphs (DCLM's BFF: paragraphs mostly seen before), then "
              "exact (same normalised text) or fuzzy (MinHash + LSH near-duplicates too). The output dir then holds "
              "the kept documents. --pipeline dclm has paragraphs unless told otherwise (none: no dedup).",
              "choices", DEDUP, choices=STEPS, hint="the per-task exact dedup is --dedup-within-task", sets="mode",
              default_text="none; paragraphs with --pipeline dclm", pipeline_defaults=(("dclm", "paragraphs"),)),
    RunOption("dedup_buckets", "Bucket elements of the dedup phases (each holds 1/N of the band keys).", "int", DEDUP,
              minimum=1, default_text="the run's number of shards", sets="buckets"),
    RunOption("dedup_components_elements", "Elements that find the clusters of duplicate pairs together, in rounds "
              "(each holds 1/N of the pairs); 1: one element holds them all.", "int", DEDUP, minimum=1,
              sets="components_elements"),
    RunOption("dedup_ngram", "fuzzy: words per shingle.", "int", DEDUP, minimum=1, sets="ngram"),
    RunOption("dedup_bands", "fuzzy: LSH bands.", "int", DEDUP, minimum=1, sets="bands"),
    RunOption("dedup_rows", "fuzzy: hashes per band.", "int", DEDUP, minimum=1, sets="rows"),
    RunOption("dedup_seed", "fuzzy: seed of the hash functions.", "int", DEDUP, minimum=0, sets="seed"),
    RunOption("dedup_verify", "Confirm each candidate pair before removal: fuzzy by its true Jaccard similarity, "
              "exact by comparing the normalised texts.", "flag", DEDUP, sets="verify"),
    RunOption("dedup_threshold", "fuzzy with --dedup-verify: the Jaccard similarity a pair needs.", "float", DEDUP,
              minimum=0, maximum=1, sets="threshold"),
    RunOption("dedup_against", "Checkpoint(s) of earlier runs with the same dedup settings: also remove copies of "
              "their documents (from their saved signatures).", "existing-paths", DEDUP, sets="against"),
    RunOption("dedup_keep_removed", "Write every removed document (all its fields, with the identity and id of the "
              "copy kept) under OUTPUT_DIR/.removed/dedup/; with paragraphs, every document that lost any, as it "
              "was, with the byte spans cut, under OUTPUT_DIR/.removed/paragraphs/.", "flag", DEDUP,
              sets="keep_removed"),
    RunOption("dedup_paragraph_ngram", "paragraphs: words per n-gram.", "int", DEDUP, minimum=1,
              sets="paragraph_ngram"),
    RunOption("dedup_paragraph_min_ngram", "paragraphs: a paragraph of at least this many words but fewer than "
              "--dedup-paragraph-ngram is one n-gram of them all; shorter ones are always kept.", "int", DEDUP,
              minimum=1, sets="paragraph_min_ngram"),
    RunOption("dedup_paragraph_threshold", "paragraphs: a paragraph (or a whole document) whose n-grams were seen "
              "earlier in the run for more than this fraction of them is removed.", "float", DEDUP, minimum=0,
              maximum=1, sets="paragraph_threshold"),
    RunOption("dedup_url_keep", "urls: of the documents with one normalised URL, keep the longest text or the "
              "newest `date` (ties: the first in the run's order).", "choice", DEDUP, choices=URL_PRIORITIES,
              sets="url_keep"),
    RunOption("dedup_line_min_chars", "lines: a document left with fewer characters than this (whitespace aside) "
              "is dropped.", "int", DEDUP, minimum=1, sets="line_min_chars"),
    RunOption("dedup_language", "fuzzy: the language of documents without a `language` field; words are split as "
              "the quality filters split that language (SudachiPy for ja, jieba for zh).", group=DEDUP,
              metavar="CODE", sets="language"),
)


@dataclass(frozen=True)
class SignatureCounts(Counts):
    documents: int = 0


def whole_documents(settings: PhaseSettings) -> DedupSettings | None:
    """The run's dedup settings when it removes whole documents (exact or fuzzy), else None:
    what plans the document dedup phases."""
    dedup = settings.get(DEDUP)
    return dedup if dedup is not None and dedup.mode else None


def documents_dir(context: PhaseContext) -> str:
    """Where the documents the document dedup compares are (after any paragraph step)."""
    return context.input_dir(context.phase(SIGNATURES))


class Signatures(Phase):
    """The first of the document dedup phases: it brings the settings and options of every
    dedup phase (the paragraph step's too)."""

    name = SIGNATURES
    # Every curation shard (identities index every curated file), and the documents as the
    # last writer before it (a paragraph step) left them.
    needs = (CURATION, OUTPUT)
    noun = SHARD
    counts = SignatureCounts
    settings_key = DEDUP
    settings_type = DedupSettings
    options = DEDUP_OPTIONS
    spreads = True

    def enabled_by(self, values: Mapping[str, Any]) -> bool:
        return values.get(DEDUP) not in (None, "", NONE)

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return shards if whole_documents(settings) else None

    def check(self, settings: PhaseSettings) -> None:
        dedup = settings.get(self.settings_key)
        if dedup is not None and dedup.against:
            against_signature_files(dedup)

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        import numpy as np

        from ...dedup.keys import identities
        from ...formats import reader_for

        reader, field = reader_for(context.output_format), context.text_field
        dedup = context.settings_of(self)
        split = Segmenting(context, dedup.language) if dedup.fuzzy else None
        every = CuratedFiles.of(context.layout, context.run.shards)

        def batches() -> Iterator[tuple[np.ndarray, pa.Array, list[tuple[str, str]] | None]]:
            files = curated_files(context.layout, index)
            for done, relative in enumerate(files):
                context.tick(done, len(files))
                path, row, texts_seen = joined(documents_dir(context), relative), 0, False
                with fetched(path) as local:  # an object is read from a local copy, a batch at a time
                    for table in reader.read_columns(str(local), (field, LANGUAGE_FIELD)):
                        ids = identities(every.index(relative), np.arange(row, row + table.num_rows))
                        row += table.num_rows
                        texts_seen = texts_seen or table[field].null_count < table.num_rows
                        yield ids, texts_of(table, field, path), split.of_batch(table) if split else None
                if row and not texts_seen:
                    raise CuratorArrayError(f"{path}: no field {field!r} to compare (--text-field names the text field)")

        documents = write_signatures(batches(), signatures_file(context.layout, index), dedup.fuzzy,
                                     dedup.bucket_count(context.run.shards.total), context.cpus)
        return PhaseResult(SignatureCounts(documents))


class Segmenting:
    """How each document's words are split: by the segmenter the quality filters use for its
    language (its ``language`` field, else ``default``: ``--dedup-language``), from the run's
    language table."""

    def __init__(self, context: PhaseContext, default: str):
        from ...stages.web.languages import language_rules

        self.table = language_rules(context.request.options.quality_settings)
        self.default = default

    def of(self, table: pa.Table) -> list[tuple[str, str]]:
        """Each row's (segmenter, language)."""
        codes, kinds = self._kinds(table)
        return [(kinds[code], code) for code in codes]

    def of_batch(self, table: pa.Table) -> list[tuple[str, str]] | None:
        """``of``, or None when every row splits at spaces (as ``minhash.words`` reads None),
        which spares a list per row in the element and in its workers."""
        from ...dedup.words import SPACED

        codes, kinds = self._kinds(table)
        return None if all(kind == SPACED for kind in kinds.values()) else [(kinds[code], code) for code in codes]

    def _kinds(self, table: pa.Table) -> tuple[list[str], dict[str, str]]:
        """Each row's language, and the segmenter of each language present."""
        from ...stages.columns import row_languages
        from ...stages.web.languages import for_language

        codes = row_languages(table, self.default)
        return codes, {code: for_language(self.table, code).segmenter for code in set(codes)}


def texts_of(table: pa.Table, field: str, path: Path) -> pa.Array:
    """The text column of a curated file, as strings."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if field not in table.column_names:
        raise CuratorArrayError(f"{path}: no field {field!r} to compare (--text-field names the text field)")
    column = table[field]
    return (pc.cast(column, pa.string()) if column.type != pa.string() else column).combine_chunks()


def write_signatures(batches: Iterable[tuple[np.ndarray, pa.Array, list | None]], path: Path, settings,
                     buckets: int = 1, cpus: int = 1) -> int:
    """The band keys of every batch's documents, in one band file (``dedup.bandfile``) of
    ``buckets`` buckets, computed over ``cpus`` processes and added in the batches' order (the
    same file whatever ``cpus``); returns how many documents."""
    from functools import partial

    from ...dedup.bandfile import BandFileWriter
    from ...dedup.lsh import batch_signature_rows
    from ...helpers.parallel import ordered_map

    documents = 0
    with BandFileWriter(path, buckets, settings.bands if settings else 1, FLUSH_ROWS) as writer:
        for rows in ordered_map(partial(batch_signature_rows, settings=settings), coalesced(batches), cpus):
            writer.add(rows)
            documents += len(rows.ids) // (settings.bands if settings else 1)
    return documents


def coalesced(batches: Iterable[tuple[np.ndarray, pa.Array, list | None]]
              ) -> Iterator[tuple[np.ndarray, pa.Array, list | None]]:
    """The batches, in order, those of small files joined into batches of at least
    ``lsh.BATCH`` documents: a batch's fixed cost (some forty array calls, a hand-over to a
    worker) would otherwise outweigh the work of a file of 60 documents (the signatures took
    1.6 times as long on 1,015 files as on 24 of the same documents, bench_signatures). The
    rows, and so the band file's bytes, are the same whatever the batches."""
    from ...dedup.lsh import BATCH
    from ...dedup.words import SPACED

    held: list[tuple[np.ndarray, pa.Array, list | None]] = []
    for batch in batches:
        held.append(batch)
        if sum(len(ids) for ids, _, _ in held) < BATCH:
            continue
        yield held[0] if len(held) == 1 else _joined(held, SPACED)
        held = []
    if held:
        yield held[0] if len(held) == 1 else _joined(held, SPACED)


def _joined(batches: list, spaced: str) -> tuple[np.ndarray, pa.Array, list | None]:
    import numpy as np
    import pyarrow as pa

    ids = np.concatenate([ids for ids, _, _ in batches])
    texts = pa.concat_arrays([texts for _, texts, _ in batches])
    if all(split is None for _, _, split in batches):
        return ids, texts, None
    split = [pair for _, texts, each in batches for pair in (each if each is not None else [(spaced, "")] * len(texts))]
    return ids, texts, split


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
        pinned = earlier.pipeline.phases.get(DEDUP) if earlier.pipeline is not None else None
        theirs = DedupSettings.from_json(pinned) if isinstance(pinned, dict) else None
        if theirs is None or theirs.signature_settings() != mine:
            raise ConfigError(f"--dedup-against {checkpoint}: its signatures were made with "
                              f"{theirs.signature_settings() if theirs else 'no dedup'}, this run's with {mine}: "
                              "the settings must be equal to compare them")
        done = set(phase_manifests(PhaseLayout(layout, SIGNATURES, SHARD), earlier.run_id))
        missing = [s for s in earlier.shards if s not in done]
        if missing:
            raise ConfigError(f"--dedup-against {checkpoint}: its signatures of shard(s) "
                              f"{format_array_expression(missing)} are not complete")
        files += [(signatures_file(layout, s), number) for s in earlier.shards]
    return files
