"""A dedup corpus of real European prose: documents of 120 to 400 words cut from Debian's
documentation (``real_text``) in six languages with accents (German, French, Italian,
Spanish, Portuguese, Dutch), 10% of them planted copies (half verbatim, half with 1% of
their words changed). The shape of most web text in those languages, and the shape the
synthetic corpus of ``bench_dedup`` is not: a vocabulary of real words with diacritics.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import real_text
from support import CACHE

LANGUAGES = ("/de-DE/", "/fr-FR/", "/it-IT/", "/es-ES/", "/pt-BR/", "/nl-NL/", "/man/de", "/man/fr")
FILES = 24
CJK = {"ja": ("/ja-JP/", "/ja/", "/man/ja"), "zh": ("/zh-CN/", "/zh-TW/", "/man/zh")}


def make(documents: int = 60_856, seed: int = 17) -> Path:
    """The corpus directory (JSONL files), made once (seeded) and kept."""
    directory = CACHE / f"prose-{documents}"
    if (directory / ".complete").exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    rng = random.Random(seed)
    words = [page_words for page in real_text.pages() if any(mark in page["source"] for mark in LANGUAGES)
             for page_words in [" ".join(page["paragraphs"]).split()] if len(page_words) >= 120]
    originals = int(documents * 0.9)
    texts = []
    while len(texts) < originals:
        source = rng.choice(words)
        length = rng.randint(120, 400)
        start = rng.randrange(max(1, len(source) - length))
        texts.append(" ".join(source[start:start + length]))
    vocabulary = sorted({word for text in texts[:2000] for word in text.split()})
    while len(texts) < documents:
        copy = texts[rng.randrange(originals)].split()
        if len(texts) % 2:
            for position in rng.sample(range(len(copy)), max(1, len(copy) // 100)):
                copy[position] = rng.choice(vocabulary)
        texts.append(" ".join(copy))
    _write(directory, [{"id": f"prose-{index:08d}", "text": text} for index, text in enumerate(texts)], rng)
    return directory


def _write(directory: Path, rows: list[dict], rng: random.Random) -> None:
    """The rows in a shuffled order, spread over ``FILES`` JSONL files; then the mark of a whole corpus."""
    order = list(range(len(rows)))
    rng.shuffle(order)
    for part in range(FILES):
        with open(directory / f"part-{part:02d}.jsonl", "w", encoding="utf-8") as out:
            for index in order[part::FILES]:
                out.write(json.dumps(rows[index], ensure_ascii=False) + "\n")
    (directory / ".complete").write_text("")


def make_small(documents: int = 60_856, per_file: int = 60) -> Path:
    """The prose corpus in many small files (``per_file`` documents each), as many crawls' outputs are."""
    directory = CACHE / f"prose-{documents}-by-{per_file}"
    if (directory / ".complete").exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    lines = [line for path in sorted(make(documents).glob("*.jsonl")) for line in open(path, encoding="utf-8")]
    for start in range(0, len(lines), per_file):
        with open(directory / f"part-{start // per_file:05d}.jsonl", "w", encoding="utf-8") as out:
            out.writelines(lines[start:start + per_file])
    (directory / ".complete").write_text("")
    return directory


def make_cjk(documents: int = 20_000, seed: int = 19) -> Path:
    """Japanese and Chinese documents of 300 to 3,000 characters, each with its ``language``
    (so dedup splits their words with SudachiPy and jieba), 10% planted verbatim copies."""
    directory = CACHE / f"cjk-{documents}"
    if (directory / ".complete").exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    rng = random.Random(seed)
    pages = {code: [" ".join(page["paragraphs"]) for page in real_text.pages()
                    if any(mark in page["source"] for mark in marks)] for code, marks in CJK.items()}
    pages = {code: [text for text in texts if len(text) >= 300] for code, texts in pages.items()}
    originals = int(documents * 0.9)
    rows = []
    while len(rows) < originals:
        code = rng.choice(sorted(pages))
        source = rng.choice(pages[code])
        length = rng.randint(300, 3000)
        start = rng.randrange(max(1, len(source) - length))
        rows.append({"text": source[start:start + length], "language": code})
    while len(rows) < documents:
        rows.append(dict(rows[rng.randrange(originals)]))
    _write(directory, [{"id": f"cjk-{index:08d}", **row} for index, row in enumerate(rows)], rng)
    return directory
