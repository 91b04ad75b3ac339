"""URL dedup, phase 1: one element per curation shard, its documents' URL keys.

Each of the shard's files is read a batch of its URL, text and date at a time; every document
with a URL gives a row (the key of its normalised URL, its identity, its priority: its text's
length, or its date with ``--dedup-url-keep newest``), grouped by bucket (``key % buckets``) in
one ``.npz`` file, so a URL buckets element loads its share alone.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.atomic import write_bytes_atomic
from ...core.counts import Counts
from ...core.phase import OUTPUT, SHARD, Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from .layouts import CURATION, URL_BUCKETS, URL_KEYS, shard_tables, url_keys_file
from .signatures import DEDUP

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from ...dedup.settings import DedupSettings
    from ..lifecycle import PhaseContext

URL, DATE = "url", "date"


def url_dedup(settings: PhaseSettings) -> DedupSettings | None:
    """The run's dedup settings when it has the URL step, else None."""
    dedup = settings.get(DEDUP)
    return dedup if dedup is not None and dedup.urls else None


@dataclass(frozen=True)
class UrlKeyCounts(Counts):
    documents: int = 0
    with_url: int = 0


class UrlKeys(Phase):
    name = URL_KEYS
    needs = (CURATION, OUTPUT)  # identities index every curated file
    noun = SHARD
    counts = UrlKeyCounts
    settings_key = DEDUP

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return shards if url_dedup(settings) else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        import numpy as np

        from ...dedup.keys import identities
        from ...dedup.urls import url_key
        keep = context.settings_of(self).url.keep
        buckets = context.elements(URL_BUCKETS).total
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        documents = 0
        for file, _, row, table in shard_tables(context, self, index, (URL, context.text_field, DATE)):
            keys = [url_key(url) for url in table[URL].to_pylist()]
            has = np.array([key is not None for key in keys], dtype=bool)
            ids = identities(file, np.arange(row, row + table.num_rows))
            parts.append((np.array([key for key in keys if key is not None], dtype=np.uint64), ids[has],
                          priorities(table, context.text_field, keep)[has]))
            documents += table.num_rows
        keys, ids, ranks = (np.concatenate([part[i] for part in parts]) if parts else np.zeros(0, dtype)
                            for i, dtype in enumerate((np.uint64, np.uint64, np.int64)))
        bucket_of = (keys % np.uint64(buckets)).astype(np.int64)
        arrays = {}
        for bucket in range(buckets):
            mine = bucket_of == bucket
            arrays.update({f"keys{bucket}": keys[mine], f"ids{bucket}": ids[mine], f"priorities{bucket}": ranks[mine]})
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        path = url_keys_file(context.layout, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, buffer.getvalue())
        return PhaseResult(UrlKeyCounts(documents, len(keys)))


def priorities(table: pa.Table, text_field: str, keep: str) -> np.ndarray:
    """Each document's priority: its text's length in characters, or its date as seconds since
    1970 (a document without a readable date the lowest)."""
    import numpy as np
    import pyarrow.compute as pc

    if keep == "longest":
        lengths = pc.utf8_length(pc.cast(table[text_field], "string")) if text_field in table.column_names else None
        return np.zeros(table.num_rows, np.int64) if lengths is None else \
            pc.fill_null(lengths, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.array([_seconds(value) for value in table[DATE].to_pylist()], dtype=np.int64)


def _seconds(value: str | None) -> int:
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return -(2**62)
    return int((moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp())
