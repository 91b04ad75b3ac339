"""A fastText model's probability that a document is of its quality label.

DCLM scores a page with a binary fastText classifier as follows, and keeps pages scoring at
least 0.018112 (``classify_fasttext_hq_prob``): the page's lines joined with single spaces,
one prediction (the top label and its probability), and one minus that probability when the
top label is not the quality label. ``quality_probability`` computes exactly that. A model
with more than two labels gives the quality label's own probability instead (what one minus
the top label's is for two).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from .model_pages import MODELS

LABEL_PREFIX = "__label__"
DEFAULT_QUALITY_LABEL = "__label__hq"
INSTALL_HINT = "pip install 'curator-array[web]'"
MAGIC = 793712314  # the first four bytes of every fastText model, .bin or .ftz
ARGS_BYTES = 12 * 4 + 8  # the training arguments after the magic and the version


def load_model(path: str | Path) -> Any:
    """The fastText model at ``path``; ConfigError names the file when it is missing, cannot
    be read or is not a fastText model."""
    try:
        import fasttext
    except ImportError:
        raise ConfigError(f"fastText models need fasttext-predict: {INSTALL_HINT}") from None
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such model file")
    try:
        with open(path, "rb"):
            pass
        return MODELS.load(lambda: fasttext.load_model(str(path)))
    except (ValueError, RuntimeError, OSError, MemoryError) as exc:
        raise ConfigError(f"{path} is not a fastText model that can be read ({exc})") from None


WORKER_BYTES = 512 * 2**20  # a Ray worker with pyarrow and a file of a shard in hand, models aside


def worker_memory(paths: Iterable[str | Path]) -> int:
    """The memory an actor that loads the models at ``paths`` holds: fastText keeps a model's
    matrices in memory as its file stores them, so each file's size, and the worker's own."""
    return WORKER_BYTES + sum(Path(path).stat().st_size for path in paths if Path(path).is_file())


def header_labels(path: str | Path) -> tuple[str, ...]:
    """The labels a fastText model file holds, sorted, read from its dictionary without loading
    its matrices (a bigram model's are 800 MB): each element reading its settings checks the
    file this way. ConfigError names a file that is missing, unreadable or not a model."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such model file")
    try:
        with open(path, "rb") as handle:
            head = handle.read(8 + ARGS_BYTES + 28)
            if len(head) < 8 + ARGS_BYTES + 28 or struct.unpack_from("<i", head)[0] != MAGIC:
                raise ConfigError(f"{path} is not a fastText model (it does not start as one)")
            size, _, labels_held, _, _ = struct.unpack_from("<iiiqq", head, 8 + ARGS_BYTES)
            labels, data, position = [], b"", 0
            for _ in range(size):  # each entry: its text, a NUL, its count (8 bytes) and its type (1: a label)
                end = data.find(b"\0", position)
                while end < 0 or end + 10 > len(data):
                    more = handle.read(1 << 20)
                    if not more:
                        raise ConfigError(f"{path} is not a fastText model (its dictionary is cut short)")
                    data, position = data[position:] + more, 0
                    end = data.find(b"\0")
                if data[end + 9] == 1:
                    labels.append(data[position:end].decode("utf-8", "replace"))
                position = end + 10
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if len(labels) != labels_held:
        raise ConfigError(f"{path} is not a fastText model (its dictionary says {labels_held} labels, holds {len(labels)})")
    return tuple(sorted(labels))


def model_labels(model: Any) -> tuple[str, ...]:
    """Every label the model can answer (a negative threshold returns them all), sorted."""
    labels, _ = model.predict("x", k=-1, threshold=-1.0)
    return tuple(sorted(labels))


def model_text(content: str) -> str:
    """A document as the classifier reads it: its lines joined with single spaces."""
    return " ".join(content.strip().splitlines())


def quality_probability(model: Any, content: str, label: str = DEFAULT_QUALITY_LABEL, binary: bool = True) -> float:
    """The probability that ``content`` is of ``label`` (see the module); ``binary``: the
    model has two labels."""
    text = model_text(content)
    if binary:
        labels, probabilities = model.predict(text)
        probability = float(probabilities[0])
        return probability if labels[0] == label else 1.0 - probability
    labels, probabilities = model.predict(text, k=-1, threshold=-1.0)
    return next((float(p) for found, p in zip(labels, probabilities) if found == label), 0.0)


def quality_probabilities(model: Any, contents: list[str], label: str = DEFAULT_QUALITY_LABEL,
                          binary: bool = True) -> list[float]:
    """``quality_probability`` of each of ``contents``, as one loop over the model's own
    predictor: the Python wrapper's checks and tuple shuffling cost 4–8% of a bigram
    model's scoring (``model_text`` leaves no newline to check for). A model that scores long
    enough moves onto huge pages (``model_pages``)."""
    with MODELS.scoring():
        return _probabilities(model, contents, label, binary)


def _probabilities(model: Any, contents: list[str], label: str, binary: bool) -> list[float]:
    predict = getattr(getattr(model, "f", None), "predict", None)
    if not binary or predict is None:
        return [quality_probability(model, content, label, binary) for content in contents]
    scores = []
    for content in contents:
        found = predict(model_text(content) + "\n", 1, 0.0, "strict")
        if not found:  # not seen with k=1 and no threshold; the wrapper's answer then
            scores.append(quality_probability(model, content, label, binary))
            continue
        probability, top = found[0]
        scores.append(probability if top == label else 1.0 - probability)
    return scores


def top_labels(model: Any, content: str, k: int = 1) -> list[tuple[str, float]]:
    """The ``k`` most probable labels of ``content`` (read as ``quality_probability`` reads
    it), best first, each without fastText's ``__label__`` prefix, with its probability."""
    labels, probabilities = model.predict(model_text(content), k=k, threshold=-1.0)
    return [(label.removeprefix(LABEL_PREFIX), float(p)) for label, p in zip(labels, probabilities)]
