"""URL dedup: one document per normalised URL, the one with the highest priority kept.

Two URLs are the same page when they differ only in what a crawler's copies of a page differ
in: ``normalized`` drops the scheme (``http`` and ``https`` alike), lowers the host, drops a
leading ``www.``, a default port, the fragment and a trailing slash, and sorts the query's
parameters. The kept copy is the one with the highest priority (the longest text, or the
newest date), ties going to the first in the run's order (the smallest identity).
"""

from __future__ import annotations

import hashlib
from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np

DEFAULT_PORTS = {"80", "443"}


def normalized(url: str) -> str:
    """The form two copies of one page share (see the module's docstring)."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    host = host[4:] if host.startswith("www.") else host
    port = f":{parts.port}" if parts.port is not None and str(parts.port) not in DEFAULT_PORTS else ""
    path = parts.path.rstrip("/")
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return f"{host}{port}{path}" + (f"?{query}" if query else "")


def url_key(url: str | None) -> int | None:
    """A stable 64-bit key of the normalised URL; None for a document without one."""
    if not url:
        return None
    return int.from_bytes(hashlib.blake2b(normalized(url).encode(), digest_size=8).digest(), "little")


def losers(keys: np.ndarray, ids: np.ndarray, priorities: np.ndarray) -> np.ndarray:
    """The identities of the documents that are not the kept copy of their URL, sorted: per
    key, all but the one with the highest priority (the smallest identity among equals)."""
    if not len(keys):
        return np.zeros(0, np.uint64)
    order = np.lexsort((ids, -priorities, keys))
    keys = keys[order]
    first = np.concatenate([[True], keys[1:] != keys[:-1]])
    return np.sort(ids[order][~first])
