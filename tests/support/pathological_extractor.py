"""An extractor that misbehaves on planted pages, standing in for what cannot be planted with
real HTML: a crash inside compiled code (``os.abort``, as a segfault in lxml would end the
process) and an extractor bug (an exception). Every other page goes to FineWeb's trafilatura
extraction. Pages that make trafilatura itself too slow are planted for real
(``slow_page``)."""

from __future__ import annotations

import os
import time

from curator_array.stages.web.extract import fineweb_text

CRASH, RAISE = "PLANTED-CRASH", "PLANTED-RAISE"


def extract(html: str) -> str:
    if CRASH in html:
        os.abort()
    if RAISE in html:
        raise ValueError("a planted extractor bug")
    return fineweb_text(html)


def slow_page(paragraphs: int = 40_000) -> str:
    """About 2 MB of paragraphs: trafilatura spends seconds on it (4.9 s measured on 2 cores)."""
    return "<html><body>" + "".join(f"<p>Paragraph {i} has a few words in it.</p>" for i in range(paragraphs)) \
        + "</body></html>"


_called = False


def slow_to_start(html: str) -> str:
    """An extractor whose first call in a process takes 1.5 s (lazy imports and set-up)."""
    global _called
    if not _called:
        _called = True
        time.sleep(1.5)
    return fineweb_text(html)
