"""A bare loop of the fastest MinHash on PyPI (rensa's ``RMinHash``, in Rust) over curated JSONL
files: our normalisation (lower case, numbers as 0, punctuation and symbols as spaces, accents
removed), our word splitting (SudachiPy and jieba for a document whose ``language`` is ja or
zh, the segmenters our dedup uses), word 5-grams, 112 permutations, in a ``Pool``. The yardstick of the signatures
benches; rensa is installed into ``.cache/bench-rensa``, never into the venv.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from multiprocessing import Pool

from support import REPO

RENSA = REPO / ".cache" / "bench-rensa"


def ensure_rensa() -> None:
    if not (RENSA / ".complete").exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(RENSA), "rensa==0.5.0"],
                       check=True)
        (RENSA / ".complete").write_text("rensa==0.5.0")
    sys.path.insert(0, str(RENSA))


def _normalised_words(text: str) -> list[str]:
    import unicodedata

    import regex

    text = regex.sub(r"\p{Nd}+(?:[.,٫]\p{Nd}+)*", "0", text.lower())
    text = regex.sub(r"[\p{P}\p{S}]", " ", text)
    return regex.sub(r"\p{Mn}+", "", unicodedata.normalize("NFD", text)).split()


# A document's words, by its ``language`` field, as our dedup splits them: SudachiPy (ja) and jieba (zh)
# on the normalised text, the others at spaces.
SEGMENTED = {"ja": "sudachi", "zh": "jieba"}


def _words(document: dict) -> list[str]:
    kind = SEGMENTED.get(document.get("language") or "")
    if kind is None:
        return _normalised_words(document["text"])
    from curator_array.text.segmenters import SEGMENTERS

    text = " ".join(_normalised_words(document["text"]))
    return [word for word in SEGMENTERS[kind](text, document["language"]) if word.strip()]


def _rensa_file(path: str) -> int:
    sys.path.insert(0, str(RENSA))
    from rensa import RMinHash

    documents = 0
    for line in open(path, encoding="utf-8"):
        words = _words(json.loads(line))
        shingles = [" ".join(words[i:i + 5]) for i in range(max(1, len(words) - 4))]
        minhash = RMinHash(num_perm=112, seed=42)
        minhash.update(shingles)
        minhash.digest()
        documents += 1
    return documents


def bare(files: list[str], workers: int) -> float:
    began = time.perf_counter()
    with Pool(workers) as pool:
        pool.map(_rensa_file, files, chunksize=1)
    return time.perf_counter() - began
