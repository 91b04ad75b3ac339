"""Real text for the quality classifier's tests: the paragraphs of the multilingual fixtures
(Debian's and GNOME's manuals, in ten languages), one document each; a model trained here
takes the developers' reference as its quality class, the other manuals as the rest."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
POSITIVE_SOURCE = "developers-reference"


def paragraphs(min_chars: int = 40) -> list[dict]:
    """Every paragraph of the fixtures with at least ``min_chars`` characters, as a document
    (``id``, ``text``, ``language``, ``source``), in a stable order."""
    documents = []
    for name in ("multilingual-docs.jsonl.gz", "multilingual-prose.jsonl.gz"):
        with gzip.open(FIXTURES / name, "rt", encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                for number, text in enumerate(part.strip() for part in record["text"].split("\n\n")):
                    if len(text) >= min_chars:
                        documents.append({"id": f"{record['id']}#{number}", "text": text,
                                          "language": record["language"], "source": record["source"]})
    return documents


def write_jsonl(path: Path, documents: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents), encoding="utf-8")
    return path


def training_files(directory: Path, positive: str = POSITIVE_SOURCE) -> tuple[Path, Path]:
    """The positive documents (those whose source starts with ``positive``) and the negative
    ones, as JSONL files."""
    documents = paragraphs()
    good = [d for d in documents if d["source"].startswith(positive)]
    bad = [d for d in documents if not d["source"].startswith(positive)]
    return write_jsonl(directory / "positive.jsonl", good), write_jsonl(directory / "negative.jsonl", bad)


OFFICIAL_PREDICT = """
import json, sys
import fasttext
model, label = fasttext.load_model(sys.argv[1]), sys.argv[2]
scores = []
for line in sys.stdin:
    labels, probabilities = model.predict(" ".join(json.loads(line).strip().splitlines()))
    scores.append(float(probabilities[0]) if labels[0] == label else 1.0 - float(probabilities[0]))
print(json.dumps(scores))
"""


def trainer_installed() -> bool:
    from curator_array.classify.training import TRAINER_DIR

    return (TRAINER_DIR / "fasttext" / "__init__.py").is_file()


def official_scores(model: Path, texts: list[str], label: str = "__label__hq") -> list[float]:
    """The texts scored by fastText's own Python package (the trainer's wheel, not the
    fasttext-predict the runs use), as DCLM's ``classify_fasttext_hq_prob`` does."""
    import subprocess
    import sys

    from curator_array.classify.training import TRAINER_DIR

    done = subprocess.run([sys.executable, "-c", OFFICIAL_PREDICT, str(model), label],
                          input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True, text=True,
                          env={"PYTHONPATH": str(TRAINER_DIR), "PATH": "/usr/bin:/bin"}, check=True)
    return json.loads(done.stdout)


def train_model(directory: Path, bucket: int = 20_000, positive_source: str = POSITIVE_SOURCE) -> Path:
    """A small model (its n-gram buckets cut, so it is ~20 MB) of one source (the developers'
    reference unless told)."""
    from curator_array.classify.training import Hyperparameters, train

    positive, negative = training_files(directory, positive_source)
    model = directory / "hq.bin"
    train([str(positive)], [str(negative)], model, settings=Hyperparameters(bucket=bucket))
    return model
