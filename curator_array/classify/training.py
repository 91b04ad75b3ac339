"""Training a quality classifier from texts a user has labelled: ``curator-array train-classifier``.

The positive and negative documents (JSONL or Parquet with a ``text`` field) are read, each
as the classifier will read it (``model.model_text``), the larger class is cut to the size
of the smaller (a seeded sample), 5% of each is held out, and a supervised fastText model is
trained on the rest with DCLM's defaults (``train_fasttext_classifier.py``: lr 0.1, dim 100,
window 5, 5 epochs, min count 1; word bigrams, as DCLM's bigram models). A bigram model's
hash ``bucket`` (2 million) makes a large file: ``quantize`` writes a ``.ftz`` instead.

The training runs in a child process on the ``fasttext-numpy2-wheel`` wheel, which this
module installs apart from the venv's packages (``install_trainer``: ``make install`` runs it),
since it provides a package named as fasttext-predict's. The model is then read back with
fasttext-predict, the way runs read it, and the held-out documents are scored with it.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import ConfigError
from .model import DEFAULT_QUALITY_LABEL, load_model, model_text, quality_probability

TRAINER = "fasttext-numpy2-wheel==0.9.2"
# Held-out precision or recall below this is reported as poor: on balanced classes chance is 0.5.
POOR_BELOW = 0.8
LARGE_MODEL_BYTES = 100 * 2**20
TRAINER_DIR = Path(sys.prefix) / "share" / "curator-array" / "fasttext-trainer"
OTHER_LABEL = "__label__cc"
HOLDOUT = 0.05


@dataclass(frozen=True)
class Hyperparameters:
    """DCLM's defaults, with word bigrams."""

    lr: float = 0.1
    dim: int = 100
    ws: int = 5
    epoch: int = 5
    minCount: int = 1  # fastText's own names
    wordNgrams: int = 2
    bucket: int = 2_000_000
    thread: int = 1  # one thread and a seed give the same model every time
    seed: int = 42


@dataclass
class Evaluation:
    """The held-out documents scored by the trained model, the label predicted when its
    probability is at least a half."""

    documents: int = 0
    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    scores: list[float] = field(default_factory=list)

    @property
    def precision(self) -> float:
        found = self.true_positives + self.false_positives
        return self.true_positives / found if found else 0.0

    @property
    def recall(self) -> float:
        wanted = self.true_positives + self.false_negatives
        return self.true_positives / wanted if wanted else 0.0

    def advice(self, settings: Hyperparameters) -> str | None:
        """One line when the model is poor on its held-out documents, with what to try; else None."""
        if min(self.precision, self.recall) >= POOR_BELOW:
            return None
        return (f"warning: held-out precision {self.precision:.3f} / recall {self.recall:.3f} is below {POOR_BELOW} "
                f"(chance is 0.5): this model barely tells the classes apart. Try more documents, more epochs "
                f"(--epoch {max(25, settings.epoch * 5)}) or a higher learning rate (--lr 0.5)")


def model_bytes(settings: Hyperparameters, words: int, labels: int = 2) -> int:
    """A full (not quantized) fastText model's size: a float32 row of ``dim`` per word and
    per n-gram bucket, and one per label."""
    return 4 * settings.dim * (words + settings.bucket + labels)


def read_texts(paths: Iterable[str | Path]) -> Iterator[str]:
    """The ``text`` of every document of JSONL (``.jsonl``, ``.jsonl.gz``) or Parquet files;
    ConfigError names a file without that field."""
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    for path in map(Path, paths):
        try:
            table = pq.read_table(path, columns=None) if path.suffix == ".parquet" else pj.read_json(path)
        except Exception as exc:  # noqa: BLE001 - any reader error names the file
            raise ConfigError(f"{path}: cannot read it as JSONL or Parquet ({exc})") from None
        if "text" not in table.column_names:
            raise ConfigError(f"{path}: no field 'text' to train on")
        yield from (text for text in table["text"].to_pylist() if isinstance(text, str) and text.strip())


def install_trainer(directory: Path = TRAINER_DIR) -> Path:
    """The trainer's package in ``directory``, installed there from the package registry if absent."""
    if (directory / "fasttext" / "__init__.py").is_file():
        return directory
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(directory),
                           TRAINER], check=False, capture_output=True, text=True)
    if done.returncode:
        raise ConfigError(f"cannot install {TRAINER} into {directory}: {done.stderr.strip()[-800:]}")
    return directory


TRAIN = """
import json, sys
import fasttext
settings = json.loads(sys.argv[1])
quantize = settings.pop("quantize")
model = fasttext.train_supervised(input=sys.argv[2], verbose=0, **settings)
if quantize:
    model.quantize(input=sys.argv[2], retrain=False)
model.save_model(sys.argv[3])
"""


def train(positive: list[str], negative: list[str], output: Path, *, label: str = DEFAULT_QUALITY_LABEL,
          other: str = OTHER_LABEL, settings: Hyperparameters = Hyperparameters(), quantize: bool = False,
          trainer: Path = TRAINER_DIR, say: Callable[[str], None] = lambda line: None) -> Evaluation:
    """Train a model of ``label`` (the positive documents) against ``other`` into ``output``;
    returns its scores on the held-out documents. ``say`` hears, before training, the size of
    a model file of more than 100 MiB."""
    if not (trainer / "fasttext" / "__init__.py").is_file():
        raise ConfigError(f"the fastText trainer is not installed in {trainer}: run python -m "
                          "curator_array.classify.training --install (make install does)")
    good, bad = [model_text(t) for t in read_texts(positive)], [model_text(t) for t in read_texts(negative)]
    if not good or not bad:
        raise ConfigError(f"no {'positive' if not good else 'negative'} document to train on")
    rng = random.Random(settings.seed)
    size = min(len(good), len(bad))
    good, bad = rng.sample(good, size), rng.sample(bad, size)
    held = max(1, round(size * HOLDOUT))
    train_lines = [f"{label} {t}" for t in good[held:]] + [f"{other} {t}" for t in bad[held:]]
    rng.shuffle(train_lines)
    size = model_bytes(settings, len({word for line in train_lines for word in line.split()}))
    if not quantize and size > LARGE_MODEL_BYTES:
        say(f"the model will take about {size / 2**20:,.0f} MiB (--bucket {settings.bucket:,} x --dim "
            f"{settings.dim} x 4 bytes); --quantize or a smaller --bucket makes it far smaller")
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="curator-array-train-") as work:
        data = Path(work) / "train.txt"
        data.write_text("".join(f"{line}\n" for line in train_lines), encoding="utf-8")
        arguments = json.dumps({**settings.__dict__, "quantize": quantize})
        done = subprocess.run([sys.executable, "-c", TRAIN, arguments, str(data), str(output)],
                              env={"PYTHONPATH": str(trainer), "PATH": "/usr/bin:/bin"}, check=False, capture_output=True,
                              text=True)
        if done.returncode:
            raise ConfigError(f"training failed: {done.stderr.strip()[-800:]}")
    model = load_model(output)
    evaluation = Evaluation()
    for text, wanted in [*((t, True) for t in good[:held]), *((t, False) for t in bad[:held])]:
        score = quality_probability(model, text, label)
        evaluation.scores.append(score)
        predicted = score >= 0.5
        evaluation.documents += 1
        evaluation.true_positives += predicted and wanted
        evaluation.false_positives += predicted and not wanted
        evaluation.false_negatives += wanted and not predicted
    return evaluation


if __name__ == "__main__":
    if sys.argv[1:] != ["--install"]:
        sys.exit("usage: python -m curator_array.classify.training --install")
    print(f"{TRAINER} in {install_trainer()}")
