"""Where the data that several phases read lives: the files the first phase wrote, the run's
frozen list of them, and each later phase's data files. The phase that writes a file and
the phases that read it all find it here, by the phases' names, without each other's
objects.

    CHECKPOINT/.nemo_curator_metadata/.phases/
      signatures/data/curated_files.parquet    the run's curated files, frozen: a file's place is its id
      url_keys/data/shard_<S>.npz              each document's URL key, identity and priority, by bucket
      url_buckets/data/bucket_<B>.npy          the identities of a bucket's documents that are not their URL's kept copy
      paragraph_ngrams/data/shard_<S>.bands    each paragraph n-gram with its run position, by bucket
      paragraph_ngrams/data/shard_<S>.totals.npz   n-grams per paragraph, per curated file of the shard
      paragraph_buckets/data/bucket_<B>.*.npy  a bucket's paragraphs with n-grams seen earlier, and how many
      signatures/data/shard_<S>.bands          each document's band keys, by bucket and band
      buckets/data/bucket_<B>.pairs            a bucket's candidate pairs
      clusters/data/shards/shard_<S>.parquet   a shard's documents in a cluster: id, copy kept, size
      quality_scores/data/shard_<S>.npz        a shard's score histograms, one per quality model
      quality_cut/data/cut.json                the run-wide thresholds and bucket edges
      quality_selection/data/shard_<S>.json    the files a shard's selection wrote (under bucket=KK/)
      tokenize/data/shard_<S>.*                a shard's token file, before the tokens phase joins them
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.atomic import create_bytes_exclusive
from ...core.errors import CuratorArrayError
from ...core.layout import CheckpointLayout, PhaseLayout
from ...core.phase import SHARD
from ...core.records.shard import shard_output_files as curated_files
from ...core.sharding import ShardRange

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from ...core.phase import Phase
    from ..lifecycle import PhaseContext

CURATION, SIGNATURES, BUCKETS, CLUSTERS, COMPONENTS, REMOVAL, TOKENIZE, TOKENS = (
    "curation", "signatures", "buckets", "clusters", "components", "removal", "tokenize", "tokens")
SCORES, CUT, SELECTION = "quality_scores", "quality_cut", "quality_selection"
PARAGRAPH_NGRAMS, PARAGRAPH_BUCKETS, PARAGRAPH_REMOVAL = "paragraph_ngrams", "paragraph_buckets", "paragraph_removal"
URL_KEYS, URL_BUCKETS, URL_REMOVAL = "url_keys", "url_buckets", "url_removal"
BUCKET = "bucket"
CURATED_FILES = "curated_files.parquet"
BAND_SUFFIX = ".bands"


@dataclass(frozen=True)
class CuratedFiles:
    """The run's curated files, sorted by path, and the curation shard that wrote each: the
    frozen list identities index (written once, by the first signatures element)."""

    paths: tuple[str, ...]
    shards: np.ndarray  # the shard of each file

    def index(self, path: str) -> int:
        position = bisect.bisect_left(self.paths, path)
        if position == len(self.paths) or self.paths[position] != path:
            raise CuratorArrayError(f"{path} is not in the run's frozen list of curated files")
        return position

    @classmethod
    def of(cls, layout: CheckpointLayout, shards: ShardRange) -> CuratedFiles:
        """The frozen list, written first if no element has written it yet."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = PhaseLayout(layout, SIGNATURES, SHARD).data_dir / CURATED_FILES
        if not path.is_file():
            listed = sorted((name, shard) for shard in shards for name in curated_files(layout, shard))
            buffer = pa.BufferOutputStream()
            pq.write_table(pa.table({"path": pa.array([name for name, _ in listed], pa.string()),
                                     "shard": pa.array([shard for _, shard in listed], pa.int64())}), buffer)
            path.parent.mkdir(parents=True, exist_ok=True)
            create_bytes_exclusive(path, buffer.getvalue().to_pybytes())  # another element may have been first
        table = pq.ParquetFile(path).read()  # read_table would import pyarrow.dataset and pandas (0.3 s)
        return cls(tuple(table["path"].to_pylist()), table["shard"].to_numpy())


def shard_tables(context: PhaseContext, phase: Phase, shard: int, columns: tuple[str, ...]
                 ) -> Iterator[tuple[int, str, int, pa.Table]]:
    """The ``columns`` of curation shard ``shard``'s documents as ``phase`` reads them, a batch
    at a time, in order: (the file's index in the frozen list, its name, the batch's first row,
    the batch)."""
    from ...formats import reader_for
    from ...storage.places import fetched, joined

    reader, every = reader_for(context.output_format), CuratedFiles.of(context.layout, context.run.shards)
    names = context.input_files(phase, shard)
    for done, relative in enumerate(names):
        context.tick(done, len(names))
        row, file = 0, every.index(relative)
        with fetched(joined(context.input_dir(phase), relative)) as local:
            for table in reader.read_columns(str(local), columns):
                yield file, relative, row, table
                row += table.num_rows


def signatures_file(layout: CheckpointLayout, shard: int) -> Path:
    """A shard's band file; an earlier release's Parquet file when that is what a run
    given with ``--dedup-against`` holds."""
    data = PhaseLayout(layout, SIGNATURES, SHARD)
    path = data.data_path(shard, BAND_SUFFIX)
    legacy = data.data_path(shard, ".parquet")
    return legacy if not path.exists() and legacy.exists() else path


def url_keys_file(layout: CheckpointLayout, shard: int) -> Path:
    """Shard ``shard``'s documents' URL keys, identities and priorities, by bucket."""
    return PhaseLayout(layout, URL_KEYS, SHARD).data_path(shard, ".npz")


def url_losers_file(layout: CheckpointLayout, bucket: int) -> Path:
    """The identities (sorted) of bucket ``bucket``'s documents whose URL keeps another copy."""
    return PhaseLayout(layout, URL_BUCKETS, BUCKET).data_path(bucket, ".npy")


def paragraph_ngrams_file(layout: CheckpointLayout, shard: int) -> Path:
    """Shard ``shard``'s paragraph n-grams (a band file of one band: positions and keys)."""
    return PhaseLayout(layout, PARAGRAPH_NGRAMS, SHARD).data_path(shard, BAND_SUFFIX)


def paragraph_totals_file(layout: CheckpointLayout, shard: int) -> Path:
    """How many n-grams each paragraph of shard ``shard``'s curated files has."""
    return PhaseLayout(layout, PARAGRAPH_NGRAMS, SHARD).data_path(shard, ".totals.npz")


def seen_files(layout: CheckpointLayout, bucket: int) -> tuple[Path, Path]:
    """Bucket ``bucket``'s paragraphs with n-grams seen earlier (positions, sorted) and how many."""
    data = PhaseLayout(layout, PARAGRAPH_BUCKETS, BUCKET)
    return data.data_path(bucket, ".positions.npy"), data.data_path(bucket, ".seen.npy")


def pairs_file(layout: CheckpointLayout, bucket: int) -> Path:
    """Bucket ``bucket``'s candidate pairs."""
    return PhaseLayout(layout, BUCKETS, BUCKET).data_path(bucket, ".pairs")


def cluster_file(layout: CheckpointLayout, shard: int) -> Path:
    """Shard ``shard``'s documents that are in a cluster: identity, the copy kept, the size."""
    return PhaseLayout(layout, CLUSTERS).data_dir / "shards" / f"shard_{shard}.parquet"


def token_file(layout: CheckpointLayout, shard: int, token_set: str = "") -> Path:
    """Where shard ``shard``'s token file of the set ``token_set`` lives (a prefix: its format
    adds the suffixes); the unnamed set's is where a run without sets keeps its one file."""
    data = PhaseLayout(layout, TOKENIZE, SHARD).data_dir
    return data / "sets" / token_set / f"shard_{shard}" if token_set else data / f"shard_{shard}"


def keys_file(prefix: Path) -> Path:
    """The shuffle keys of a token file's documents (uint64, in its order)."""
    return prefix.with_name(prefix.name + ".keys")


def sets_file(layout: CheckpointLayout, shard: int) -> Path:
    """The sets shard ``shard`` wrote, with their documents and tokens (none before sets existed)."""
    return PhaseLayout(layout, TOKENIZE, SHARD).data_dir / f"shard_{shard}.sets.json"
