"""JSONL shards of the shape web text has, made of real multilingual prose.

A bench whose input is ASCII words measures a path that real text seldom takes: web pages
carry curly quotes, dashes and accents, and a good share is not English at all. The prose
here is Debian's documentation, real and freely licensed: Python's library docs (English),
the Debian Administrator's Handbook in 25 languages (Arabic, Chinese, Greek, Japanese,
Korean, Persian, Russian, Vietnamese, ...), the Developer's Reference in five, and manual
pages in Japanese, Chinese, German and French. The packages are fetched with
``apt-get download`` (no installation) and their text extracted once, into the bench cache.

A document is a run of consecutive paragraphs of one source page (so one language and one
topic, as a web page is), of a length drawn from a log-normal distribution: a median of
about 2,000 characters and a long tail past 100,000, like the main text of Common Crawl's
pages. 3% of documents are empty and 5% hold a few words, as the synthetic input has, so the
filters have something to drop. Every document has ``id``, ``url``, ``text`` and a numeric
``score``.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import random
import re
import subprocess
import tempfile
from pathlib import Path

from support import CACHE

PACKAGES = ("python3.11-doc", "debian-handbook", "developers-reference-de", "developers-reference-fr",
            "developers-reference-it", "developers-reference-ja", "developers-reference-ru", "manpages-ja",
            "manpages-zh", "manpages-de", "manpages-fr")
CORPUS = CACHE / "real-text" / "pages.jsonl.gz"
MEDIAN_CHARS, SIGMA = 2_000, 1.3

_ROFF_TEXT_MACROS = re.compile(r"^\.(?:B|I|BI|BR|IB|IR|RB|RI|SH|SS|SM|SB)\s+(.*)$")
_ROFF_BREAK_MACROS = re.compile(r"^\.(?:PP|LP|P|SH|SS|TP|IP|HP|sp|br)\b")
_ROFF_ESCAPE = re.compile(r"\\f(?:\[[^\]]*\]|\(..|.)|\\\(..|\\\[[^\]]*\]|\\[&|^%]|\\s[-+]?\d")


def pages() -> list[dict]:
    """Every source page as ``{"source", "paragraphs"}``, extracted once and cached."""
    if not CORPUS.exists():
        _extract()
    with gzip.open(CORPUS, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _extract() -> None:
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        subprocess.run(["apt-get", "download", "-q", *PACKAGES], cwd=root, check=True, capture_output=True)
        for deb in root.glob("*.deb"):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root / "tree")], check=True)
        found = [*_html_pages(root / "tree"), *_man_pages(root / "tree")]
        CORPUS.parent.mkdir(parents=True, exist_ok=True)
        partial = CORPUS.with_suffix(".partial")
        with gzip.open(partial, "wt", encoding="utf-8") as handle:
            for page in found:
                handle.write(json.dumps(page, ensure_ascii=False) + "\n")
        partial.rename(CORPUS)


def _html_pages(tree: Path):
    from resiliparse.extract.html2text import extract_plain_text

    for path in sorted(tree.rglob("*.html")):
        text = extract_plain_text(path.read_text(errors="replace"), main_content=True)
        paragraphs = [line.strip() for line in text.splitlines() if line.strip()]
        if paragraphs:
            yield {"source": str(path.relative_to(tree)), "paragraphs": paragraphs}


def _man_pages(tree: Path):
    for path in sorted((tree / "usr/share/man").rglob("*.gz")):
        try:
            source = gzip.decompress(path.read_bytes()).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        paragraphs, current = [], []
        for line in source.splitlines():
            if line.startswith((".\\\"", "'\\\"")):
                continue
            if _ROFF_BREAK_MACROS.match(line) or not line.strip():
                if current:
                    paragraphs.append(" ".join(current))
                current = []
            macro = _ROFF_TEXT_MACROS.match(line)
            if line.startswith((".", "'")) and not macro:
                continue
            words = _ROFF_ESCAPE.sub("", (macro.group(1) if macro else line).replace("\\-", "-").replace('"', ""))
            if words.strip():
                current.append(words.strip())
        if current:
            paragraphs.append(" ".join(current))
        if paragraphs:
            yield {"source": str(path.relative_to(tree)), "paragraphs": paragraphs}


def write_shard(directory: Path, files: int, target_bytes: int, seed: int = 11) -> int:
    """JSONL files of about ``target_bytes`` in all, made once (seeded) and kept; the document count."""
    marker = directory / ".complete"
    if marker.exists():
        return int(marker.read_text())
    directory.mkdir(parents=True, exist_ok=True)
    sources = pages()
    weights = list(itertools.accumulate(sum(map(len, page["paragraphs"])) for page in sources))
    rng = random.Random(seed)
    docs, per_file = 0, target_bytes // files
    for index in range(files):
        size = 0
        with open(directory / f"part-{index:03d}.jsonl", "w", encoding="utf-8") as handle:
            while size < per_file:
                page = rng.choices(sources, cum_weights=weights)[0]  # a long document from a long page
                line = json.dumps({"id": f"{index}-{docs}", "url": f"https://docs.example.org/{page['source']}#{docs}",
                                   "text": _document(rng, page["paragraphs"]),
                                   "score": round(rng.random(), 6)}, ensure_ascii=False) + "\n"
                handle.write(line)
                size += len(line.encode())
                docs += 1
    marker.write_text(str(docs))
    return docs


def _document(rng: random.Random, paragraphs: list[str]) -> str:
    roll = rng.random()
    if roll < 0.03:
        return ""
    start = rng.randrange(len(paragraphs))
    if roll < 0.08:
        return " ".join(" ".join(paragraphs[start:]).split()[:rng.randint(1, 4)])
    wanted = int(rng.lognormvariate(math.log(MEDIAN_CHARS), SIGMA))
    chosen, length = [], 0
    while length < wanted:  # runs on past the page's end into its start: a page is a loop of its paragraphs
        paragraph = paragraphs[(start + len(chosen)) % len(paragraphs)]
        chosen.append(paragraph)
        length += len(paragraph) + 1
        if len(chosen) >= 4 * len(paragraphs):
            break
    return "\n".join(chosen)
