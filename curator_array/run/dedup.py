"""The dedup phases of a run, one element at a time: checked, done, recorded.

An element first holds the run to its contract (the pipeline with its dedup settings must
be the one ``run.json`` pins) and checks that the phase before it is complete; if not, it
exits 2 at once naming the missing elements, so a phase queued behind a failed one ends
quickly instead of waiting forever. Then it does its share (``dedup.phases``) and writes its
completion manifest (``core.phases``); an error leaves an attempt record, SIGKILL nothing:
either way the element has no manifest and ``retry`` names it.

No Ray: each element is file work in one process, bounded by its share (docs/dedup.md).
"""

from __future__ import annotations

import logging
import os
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.arrays import format_array_expression
from ..core.checkpoint import scan_completion_manifests
from ..core.errors import ConfigError, CuratorArrayError
from ..core.layout import CheckpointLayout, utc_now
from ..core.phases import (
    CURATION,
    NEEDS,
    PHASES,
    DedupSettings,
    PhaseFailure,
    PhaseLayout,
    PhaseManifest,
    phase_manifests,
)
from ..core.records import CompletionManifest
from ..core.run_contract import RunConfig, check_pipeline, read_run_config
from ..dedup.minhash import MinHashSettings
from ..dedup.phases import (
    confirmed_pairs,
    copy_without_rows,
    document_key,
    removed_keys,
    split_key,
    write_bucket_pairs,
    write_signatures,
    write_table_atomically,
)
from ..formats import reader_for
from ..slurm.jobenv import JobEnvironment
from .request import RunRequest

logger = logging.getLogger(__name__)

# What an element holds at its peak per item of its share, measured (docs/dedup.md); an
# element whose share would not fit in its memory is refused before it loads anything.
BYTES_PER_PAIR = 600  # clusters: the union-find table and the pair's strings
BYTES_PER_BAND_KEY = 260  # buckets: the band-key rows, their ranks and the sort
AGAINST_PREFIX = "\x00"  # sorts before every path: an earlier run's document is always the kept copy
# For fault tests only: "PHASE:INDEX:MARKER" holds that element at its first file, after
# creating MARKER, so a test can SIGKILL it mid-work at a known point.
HOLD_VARIABLE = "CURATOR_ARRAY_TEST_HOLD_ELEMENT"


class InputsIncomplete(ConfigError):
    """A phase element started before the phase it reads was complete."""


@dataclass
class PhaseRun:
    """What every element of one run's dedup phases shares: the contract and where things are."""

    request: RunRequest
    run: RunConfig
    settings: DedupSettings
    job: JobEnvironment
    tick_stop: Callable[[], None] = lambda: None  # raises when the run is told to stop
    current: tuple[str, int] | None = None  # the element being run
    started: float = 0.0
    last_report: float = 0.0
    known: dict[str, dict[int, PhaseManifest]] = field(default_factory=dict)  # see ``manifests``

    @classmethod
    def open(cls, request: RunRequest, job: JobEnvironment, tick: Callable[[], None] | None = None) -> PhaseRun:
        """Refuse a checkpoint without a run, a run without dedup, or a different pipeline or dedup settings."""
        layout = request.layout
        if not layout.run_file.is_file():
            raise ConfigError(f"{layout.root} holds no run yet: the dedup phases start after its curation phase "
                              "(curator-array run, or submit)")
        run = read_run_config(layout)
        pipeline = request.build_pipeline(save_crawls=False)
        check_pipeline(layout, run, pipeline.fingerprint())
        settings = DedupSettings.of_pipeline(run.pipeline)
        if settings is None:
            raise ConfigError(f"the run in {layout.root} has no dedup phases (it was started without --dedup)")
        return cls(request, run, settings, job, tick or (lambda: None))

    def tick(self, done: int = 0, of: int = 0) -> None:
        """Between files: stop when told to, say how far the element is every
        ``--progress-interval`` seconds (and hold here when a fault test asks to)."""
        self.tick_stop()
        now, interval = time.monotonic(), self.request.progress_interval
        if of and interval and now - self.last_report >= interval and self.current is not None:
            self.last_report = now
            logger.info("%s element %d: %d/%d files, %.0fs", *self.current, done, of, now - self.started)
        hold = os.environ.get(HOLD_VARIABLE, "")
        if hold and self.current is not None:
            phase, index, marker = hold.split(":", 2)
            if (phase, int(index)) == self.current and not Path(marker).exists():
                Path(marker).write_text(str(os.getpid()))
                time.sleep(3600)

    @property
    def layout(self) -> CheckpointLayout:
        return self.request.layout

    @property
    def staged(self) -> Path:
        return Path(self.request.options.written_dir)

    @property
    def output_dir(self) -> Path:
        return Path(self.request.options.output_dir)

    @cached_property
    def minhash(self) -> MinHashSettings | None:
        s = self.settings
        return MinHashSettings(s.ngram, s.bands, s.rows, s.seed) if s.mode == "fuzzy" else None

    @cached_property
    def curated(self) -> set[int]:
        return scan_completion_manifests(self.layout, self.run).shards

    def curation_files(self, shard: int) -> tuple[str, ...]:
        return CompletionManifest.read(self.layout.manifest_path(shard)).work.output_files

    def reader(self):
        return reader_for((self.run.pipeline or {}).get("output") or "jsonl")

    def manifests(self, phase: str, refresh: bool = False) -> dict[int, PhaseManifest]:
        """The complete elements of a dedup phase: read once (again with ``refresh``), then
        kept up to date by ``run_element``, so running many elements in one process does
        not reread every manifest for each."""
        if refresh or phase not in self.known:
            self.known[phase] = phase_manifests(self.layout, phase, self.run.run_id)
        return self.known[phase]

    def complete(self, phase: str) -> set[int]:
        return self.curated if phase == CURATION else set(self.manifests(phase))

    def elements(self, phase: str):
        return self.settings.elements(phase, self.run.shards)

    def missing_inputs(self, phase: str, index: int) -> str | None:
        """What ``phase``'s element ``index`` waits for, or None when its inputs are complete."""
        before = NEEDS[phase]
        done = self.complete(before)
        wanted = [index] if phase == "signatures" else list(self.elements(before))
        missing = [i for i in wanted if i not in done]
        if missing:
            noun = "shard" if before in (CURATION, "signatures", "removal") else "element"
            return f"{before} {noun}(s) {format_array_expression(missing)}"
        return None


def run_element(phase_run: PhaseRun, phase: str, index: int, force: bool = False) -> PhaseManifest | None:
    """One element of ``phase``; None when it was already complete."""
    layout = phase_run.layout
    elements = phase_run.elements(phase)
    if index not in elements:
        raise ConfigError(f"{phase} has elements {elements}, not {index} (TOTAL_SHARDS and the array must match "
                          "what submit queued: curator-array retry prints them)")
    if not force and index in phase_run.complete(phase):
        logger.info("%s element %d is already complete", phase, index)
        return None
    attempt = phase_run.job.attempt_id()
    started, clock = utc_now(), time.monotonic()
    try:
        missing = phase_run.missing_inputs(phase, index)
        if missing:
            raise InputsIncomplete(
                f"{phase} element {index} cannot start: {missing} of the run in {layout.root} are not complete; "
                "curator-array status shows what blocks it, curator-array retry what to resubmit")
        logger.info("%s element %d of %s: starting", phase, index, elements)
        phase_run.current, phase_run.started = (phase, index), time.monotonic()
        phase_run.last_report = phase_run.started
        counts, sizes = WORK[phase](phase_run, index)
    except BaseException as exc:
        code = getattr(exc, "exit_code", 1)
        PhaseFailure(phase, index, str(attempt), str(exc) or type(exc).__name__, code,
                     phase_run.job.identity()).write(layout, attempt)
        raise
    manifest = PhaseManifest(
        phase, index, len(elements), phase_run.run.run_id, counts, {str(k): v for k, v in sizes.items()}, started,
        utc_now(), round(time.monotonic() - clock, 3), round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        str(attempt), phase_run.job.identity())
    path = manifest.write(layout)
    phase_run.manifests(phase)[index] = manifest
    logger.info("%s element %d complete in %.1fs: %s; manifest %s", phase, index, manifest.duration_s,
                ", ".join(f"{k} {v}" for k, v in counts.items()), path)
    return manifest


def _texts(table: pa.Table, field: str, path: Path) -> pa.Array:
    if field not in table.column_names:
        raise CuratorArrayError(f"{path}: no field {field!r} to compare (--text-field names the text field)")
    column = table[field]
    return (pc.cast(column, pa.string()) if column.type != pa.string() else column).combine_chunks()


def _signatures(phase_run: PhaseRun, shard: int) -> tuple[dict[str, int], dict]:
    reader, field = phase_run.reader(), phase_run.request.options.text_field

    def batches() -> Iterator[tuple[list[str], pa.Array]]:
        files = phase_run.curation_files(shard)
        for done, relative in enumerate(files):
            phase_run.tick(done, len(files))
            path = phase_run.staged / relative
            table = reader.read_file(str(path)).table
            if table.num_rows:
                yield [document_key(relative, row) for row in range(table.num_rows)], _texts(table, field, path)

    target = PhaseLayout(phase_run.layout, "signatures").data_path(shard)
    documents = write_signatures(batches(), target, phase_run.minhash, len(phase_run.elements("buckets")))
    return {"documents": documents}, {}


def against_signature_files(settings: DedupSettings) -> list[tuple[Path, str]]:
    """The signature files of the earlier runs given with ``--dedup-against``, each with its key
    prefix; a run that is missing, incomplete or made with other settings is refused (exit 2)."""
    files = []
    mine = settings.signature_settings()
    for number, checkpoint in enumerate(settings.against):
        layout = CheckpointLayout(checkpoint)
        if not layout.run_file.is_file():
            raise ConfigError(f"--dedup-against {checkpoint}: no run there")
        earlier = read_run_config(layout)
        theirs = DedupSettings.of_pipeline(earlier.pipeline)
        if theirs is None or theirs.signature_settings() != mine:
            raise ConfigError(f"--dedup-against {checkpoint}: its signatures were made with "
                              f"{theirs.signature_settings() if theirs else 'no dedup'}, this run's with {mine}: "
                              "the settings must be equal to compare them")
        done = set(phase_manifests(layout, "signatures", earlier.run_id))
        missing = [s for s in earlier.shards if s not in done]
        if missing:
            raise ConfigError(f"--dedup-against {checkpoint}: its signatures of shard(s) "
                              f"{format_array_expression(missing)} are not complete")
        files += [(PhaseLayout(layout, "signatures").data_path(s), f"{AGAINST_PREFIX}{number}{AGAINST_PREFIX}")
                  for s in earlier.shards]
    return files


def _ticking(items: list, tick: Callable[[int, int], None]) -> Iterator:
    for done, item in enumerate(items):
        tick(done, len(items))
        yield item


def _read_texts(phase_run: PhaseRun, keys: list[str]) -> dict[str, str]:
    """The texts of ``keys`` (this run's only), read file by file from the curation outputs."""
    by_file: dict[str, list[int]] = {}
    for key in keys:
        if not key.startswith(AGAINST_PREFIX):
            path, row = split_key(key)
            by_file.setdefault(path, []).append(row)
    reader, field, texts = phase_run.reader(), phase_run.request.options.text_field, {}
    for relative, rows in by_file.items():
        phase_run.tick()
        path = phase_run.staged / relative
        column = _texts(reader.read_file(str(path)).table, field, path).take(pa.array(rows))
        texts.update(zip((document_key(relative, r) for r in rows), column.to_pylist()))
    return texts


def _buckets(phase_run: PhaseRun, bucket: int) -> tuple[dict[str, int], dict]:
    documents = sum(m.counts.get("documents", 0) for m in phase_run.manifests("signatures").values())
    rows = documents * (phase_run.settings.bands if phase_run.minhash else 1) // len(phase_run.elements("buckets"))
    refuse_beyond_memory("buckets", rows, "band keys", BYTES_PER_BAND_KEY, memory_limit_mb(phase_run.job))
    signatures = PhaseLayout(phase_run.layout, "signatures")
    files: list = [signatures.data_path(s) for s in phase_run.run.shards] + against_signature_files(phase_run.settings)
    target = PhaseLayout(phase_run.layout, "buckets").data_path(bucket)
    pairs, held = write_bucket_pairs(_ticking(files, phase_run.tick), bucket, len(phase_run.elements("buckets")), target)
    counts = {"band_keys": held, "candidate_pairs": pairs.num_rows}
    settings = phase_run.settings
    if settings.verify and pairs.num_rows:
        pairs = confirmed_pairs(pairs, lambda keys: _read_texts(phase_run, keys), settings.threshold,
                                phase_run.minhash)
        write_table_atomically(pairs, target)
    counts["pairs"] = pairs.num_rows
    return counts, {}


def memory_limit_mb(job: JobEnvironment) -> float | None:
    """The job's memory on this node, else what the machine has available."""
    if job.mem_per_node_mb:
        return float(job.mem_per_node_mb)
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def refuse_beyond_memory(element: str, items: int, noun: str, bytes_each: int, limit_mb: float | None) -> None:
    """Refuse an element whose share (``items`` of ``bytes_each``) cannot fit in its memory."""
    needed = items * bytes_each / 2**20
    if limit_mb is not None and needed > 0.8 * limit_mb:
        raise ConfigError(
            f"the {element} element would hold {items:,} {noun}, about {needed:,.0f} MiB, but it has "
            f"{limit_mb:,.0f} MiB: give it more memory (memory = \"{int(needed * 1.5)}M\" in the site file, or "
            "sbatch --mem), or split the corpus into runs chained with --dedup-against")


def removed_path(layout: CheckpointLayout, shard: int) -> Path:
    return PhaseLayout(layout, "clusters").data_dir / "removed" / f"shard_{shard}.parquet"


def _clusters(phase_run: PhaseRun, index: int) -> tuple[dict[str, int], dict]:
    buckets = PhaseLayout(phase_run.layout, "buckets")
    pairs = sum(m.counts.get("pairs", 0) for m in phase_run.manifests("buckets").values())
    refuse_beyond_memory("clusters", pairs, "duplicate pairs", BYTES_PER_PAIR, memory_limit_mb(phase_run.job))
    removed, sizes = removed_keys(buckets.data_path(b) for b in phase_run.elements("buckets"))
    ours = sorted(k for k in removed if not k.startswith(AGAINST_PREFIX))
    owner = {file: shard for shard in phase_run.run.shards for file in phase_run.curation_files(shard)}
    rows: dict[int, tuple[list[str], list[int]]] = {shard: ([], []) for shard in phase_run.run.shards}
    for key in ours:
        file, row = split_key(key)
        files, numbers = rows[owner[file]]
        files.append(file)
        numbers.append(row)
    for shard, (files, numbers) in rows.items():
        phase_run.tick()
        write_table_atomically(pa.table({"file": pa.array(files, pa.string()), "row": pa.array(numbers, pa.int64())}),
                               removed_path(phase_run.layout, shard))
    return {"pairs": pairs, "removed": len(ours), "clusters": sum(sizes.values())}, sizes


def _removal(phase_run: PhaseRun, shard: int) -> tuple[dict[str, int], dict]:
    table = pq.read_table(removed_path(phase_run.layout, shard))
    removed: dict[str, set[int]] = {}
    for file, row in zip(table["file"].to_pylist(), table["row"].to_pylist()):
        removed.setdefault(file, set()).add(row)
    rows_in = rows_out = 0
    files = phase_run.curation_files(shard)
    for done, relative in enumerate(files):
        phase_run.tick(done, len(files))
        rows, kept = copy_without_rows(phase_run.staged / relative, phase_run.output_dir / relative,
                                       removed.get(relative, set()))
        rows_in, rows_out = rows_in + rows, rows_out + kept
    return {"rows_in": rows_in, "rows_out": rows_out, "removed": rows_in - rows_out}, {}


WORK = {"signatures": _signatures, "buckets": _buckets, "clusters": _clusters, "removal": _removal}


def run_ready_phases(phase_run: PhaseRun, force: bool = False) -> str | None:
    """Every dedup element whose inputs are complete, phase by phase, in this process.

    Returns what the next phase still waits for (None when the run is complete): a run of
    one shard at a time on a workstation finishes the dedup phases with its last shard.
    """
    for phase in PHASES:
        done = set(phase_run.manifests(phase, refresh=True))
        for index in phase_run.elements(phase):
            if index in done and not force:
                continue
            missing = phase_run.missing_inputs(phase, index)
            if missing:
                return f"{phase} waits for {missing}"
            run_element(phase_run, phase, index, force)
    return None


def run_phase_command(request: RunRequest, job: JobEnvironment, index: int | None,
                      tick: Callable[[], None] | None = None) -> int:
    """``run --phase P``: element ``index`` of the phase, or, without a shard, each of its elements."""
    phase_run = PhaseRun.open(request, job, tick)
    phase = request.phase
    if phase == CURATION:
        raise ValueError("the curation phase is the shard run")
    for element in ([index] if index is not None else list(phase_run.elements(phase))):
        run_element(phase_run, phase, element, request.force)
    return 0


def describe_wait(waiting: str | None, layout: CheckpointLayout) -> None:
    if waiting:
        logger.info("dedup phases: %s (run the remaining shards; curator-array status --checkpoint-path %s)",
                    waiting, layout.root)
    else:
        logger.info("dedup phases complete: the output dir holds the deduplicated documents")

