"""Dedup, phase 2: ``buckets`` elements, each the candidate pairs of its share of band keys.

Element ``b`` reads, one band at a time, the rows of bucket ``b`` (band keys with
``band_key % buckets == b``) from every shard's band file, and pairs each document with the
smallest identity sharing one of its band keys. Memory: one band of this bucket's share
(documents ÷ buckets rows of 16 bytes, sorted) and the pairs found so far; numpy only, no
pyarrow (unless ``--dedup-verify`` rereads the texts to confirm each pair).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.counts import Counts
from ...core.errors import CorruptCheckpointError
from ...core.phase import Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ...storage.places import fetched, joined
from ..lifecycle import refuse_beyond_memory
from .layouts import BUCKET, BUCKETS, SIGNATURES, CuratedFiles, pairs_file, signatures_file
from .signatures import (
    BUCKETS_KEY,
    DEDUP,
    Segmenting,
    against_signature_files,
    documents_dir,
    texts_of,
    whole_documents,
)

if TYPE_CHECKING:
    import numpy as np

    from ..lifecycle import PhaseContext

BYTES_PER_BAND_KEY = 100  # at the peak, per row of one band of the share, pairs included (docs/dedup.md)


@dataclass(frozen=True)
class BucketCounts(Counts):
    band_keys: int = 0
    candidate_pairs: int = 0
    pairs: int = 0


class Buckets(Phase):
    name = BUCKETS
    needs = (SIGNATURES,)
    noun = BUCKET
    counts = BucketCounts
    settings_key = DEDUP

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        dedup = whole_documents(settings)
        return ShardRange(dedup.bucket_count(shards.total)) if dedup is not None else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        from ...dedup.pairfile import write_pairs

        dedup, buckets = context.settings_of(self), len(context.elements(self.name))
        documents = sum(m.counts.documents for m in context.manifests(SIGNATURES).values())
        refuse_a_band_beyond_memory(documents, buckets, context.memory_limit_mb())
        files: list[tuple[Path, int | None]] = [(signatures_file(context.layout, s), None) for s in context.run.shards]
        files += against_signature_files(dedup)
        bands = dedup.minhash.bands if dedup.fuzzy else 1
        (first, second), held = bucket_pairs(files, index, buckets, bands, context.tick, dedup.fuzzy is not None)
        candidates = len(first)
        if dedup.verify and candidates:
            from ...dedup.lsh import confirmed_pairs

            first, second = confirmed_pairs(first, second, lambda keys: _read_texts(context, keys, dedup.language),
                                            dedup.threshold, dedup.fuzzy)
        write_pairs(pairs_file(context.layout, index), first, second, context.run.run_id)
        return PhaseResult(BucketCounts(held, candidates, len(first)))


def refuse_a_band_beyond_memory(documents: int, buckets: int, limit_mb: float | None) -> None:
    """Refuse a buckets element whose band would not fit, naming the bucket count that would."""
    fits = -(-documents * BYTES_PER_BAND_KEY // int(0.8 * (limit_mb or 1) * 2**20))
    refuse_beyond_memory("buckets", documents // buckets, "band keys of one band", BYTES_PER_BAND_KEY, limit_mb,
                         instead=f"raise --dedup-buckets (to {fits:,} or more: it is pinned at submit)")


def bucket_pairs(signature_files: Iterable[tuple[Path, int | None]], bucket: int, buckets: int, bands: int,
                 tick=lambda done, total: None, minhash: bool = True) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """The candidate pairs of one bucket, and how many band keys it held, a band at a time;
    a signature file may come with the source its documents take (an earlier run's, for
    ``--dedup-against``). Each file is checked once, before any band is read."""
    import numpy as np

    from ...dedup.candidates import band_pairs, distinct_pairs
    from ...dedup.keys import with_source

    readers = [(open_signatures(path, minhash), source) for path, source in signature_files]
    firsts, seconds, held = [], [], 0
    for band in range(bands):
        tick(band, bands)
        ids, keys = [], []
        for reader, source in readers:
            mine, their_keys = reader.share(bucket, buckets, band)
            ids.append(mine if source is None else with_source(mine, source))
            keys.append(their_keys)
        ids, keys = (np.concatenate(ids), np.concatenate(keys)) if ids else (np.empty(0, np.uint64),) * 2
        held += len(ids)
        first, second = band_pairs(ids, keys)
        firsts.append(first)
        seconds.append(second)
    return distinct_pairs(firsts, seconds), held


def open_signatures(path: Path, minhash: bool = True):
    """A shard's signature file, read with ``share(bucket, buckets, band)``: a band file, or
    an earlier release's Parquet file (exact dedup only: that release's MinHash differs)."""
    from ...dedup.bandfile import EARLIER_MINHASH, BandFile

    if path.suffix != ".parquet":
        return BandFile(path, minhash)
    if minhash:
        raise CorruptCheckpointError(f"{path}: {EARLIER_MINHASH}: rerun its signatures element")
    return LegacySignatures(path)


class LegacySignatures:
    """An earlier release's Parquet signature file (``id``, ``band``, ``band_key``, ``bucket``),
    read with the filters its row groups' statistics serve."""

    def __init__(self, path: Path):
        import pyarrow.parquet as pq

        self.path = path
        self.buckets = int((pq.read_schema(path).metadata or {}).get(BUCKETS_KEY, b"0"))

    def share(self, bucket: int, buckets: int, band: int) -> tuple[np.ndarray, np.ndarray]:
        import pyarrow.parquet as pq

        from ...dedup.bandfile import in_bucket

        filters = [("band", "=", band)] + ([("bucket", "=", bucket)] if buckets == self.buckets else [])
        table = pq.read_table(self.path, columns=["id", "band_key"], filters=filters)
        return in_bucket(table["id"].to_numpy(), table["band_key"].to_numpy(), bucket, buckets)


def _read_texts(context: PhaseContext, ids: list[int], language: str) -> dict[int, tuple[str, tuple[str, str]]]:
    """The texts of documents ``ids`` (this run's only), with their segmenters, read file by
    file from the curation outputs."""
    import numpy as np
    import pyarrow as pa

    from ...dedup.keys import THIS_RUN, files, identities, rows, sources
    from ...formats import reader_for

    ids = np.array(ids, dtype=np.uint64)
    ids = ids[sources(ids) == THIS_RUN]
    every = CuratedFiles.of(context.layout, context.run.shards)
    reader, texts, split = reader_for(context.output_format), {}, Segmenting(context, language)
    for file in np.unique(files(ids)).tolist():
        context.tick()
        wanted = rows(ids[files(ids) == file])
        path = joined(documents_dir(context), every.paths[file])
        with fetched(path) as local:
            table = reader.read_file(str(local)).table.take(pa.array(wanted))
        texts.update(zip(identities(file, wanted).tolist(),
                         zip(texts_of(table, context.text_field, path).to_pylist(), split.of(table))))
    return texts
