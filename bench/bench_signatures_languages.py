"""Dedup's signatures on real text by language: space-separated text against Japanese and
Chinese, whose words come from SudachiPy and jieba (as the quality filters split them).

Documents are whole pages of Debian's documentation (``real_text``): the English, Japanese
and Chinese ones, up to 3,000 each. One core, in this process, the segmenter loaded first;
prints documents/s and MB/s of ``signature_rows`` (best of 2) and the time the segmenter
alone takes on the same simplified texts. Asserts nothing.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_text  # noqa: E402

LANGUAGES = {  # which pages, and how their words are split
    "en": (("/en-US/", "/python3.11/"), ("spaced", "en")),
    "ja": (("/ja/", "/ja-JP/"), ("sudachi", "ja")),
    "zh": (("zh_CN", "zh-CN", "zh_TW", "zh-TW"), ("jieba", "zh")),
}
LIMIT = 3000


def main() -> None:
    import numpy as np
    import pyarrow as pa

    from curator_array.dedup.lsh import signature_rows
    from curator_array.dedup.settings import MinHashSettings
    from curator_array.dedup.words import simplify
    from curator_array.text.segmenters import SEGMENTERS

    pages = real_text.pages()
    print("| language | documents | MB | signatures | documents/s | MB/s | the segmenter alone |")
    print("|---|---|---|---|---|---|---|")
    for language, (marks, (kind, code)) in LANGUAGES.items():
        documents = [text for page in pages if any(mark in page["source"] for mark in marks)
                     if (text := "\n\n".join(page["paragraphs"])).strip()][:LIMIT]
        texts, split = pa.array(documents), [(kind, code)] * len(documents)
        ids = np.arange(len(documents), dtype=np.uint64)
        megabytes = sum(len(text.encode()) for text in documents) / 1e6
        signature_rows(ids[:20], texts.slice(0, 20), MinHashSettings(), split[:20])  # the segmenter's dictionary
        best = float("inf")
        for _ in range(2):
            began = time.perf_counter()
            signature_rows(ids, texts, MinHashSettings(), split)
            best = min(best, time.perf_counter() - began)
        began = time.perf_counter()
        if kind != "spaced":
            for text in simplify(texts).to_pylist():
                SEGMENTERS[kind](text, code)
        alone = time.perf_counter() - began
        print(f"| {language} ({kind}) | {len(documents):,} | {megabytes:.1f} | {best:.2f} s | {len(documents) / best:,.0f} "
              f"| {megabytes / best:.2f} | {alone:.2f} s |")


if __name__ == "__main__":
    main()
