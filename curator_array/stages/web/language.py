"""Language identification with py3langid, whose model ships inside its package.

Adds ``language`` (ISO 639-1) and ``language_score`` (a probability) columns, and keeps
documents whose language is in ``languages`` (all, if empty) with a score of at least
``min_score``. Only the first ``max_chars`` characters are classified: enough for a
stable answer, and long pages then cost no more than short ones.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ...core.errors import ConfigError
from ...text.language import LANGUAGE_FIELD, LANGUAGE_SCORE_FIELD, unknown_codes
from ..defaults import TEXT_FIELD
from ..filters import FilterStage
from ..process_state import PerProcess
from ..requirements import Requirement, module

# The codes py3langid's model answers (its ``nb_classes``; a test keeps this list equal to
# the model's), so that --languages is checked where a pipeline is built without loading it.
PY3LANGID_LANGUAGES = frozenset("""ace af am an ar ary arz as az ba bcl be bg bn br bs ca crh cs cy da de dz el en eo es et
    eu ext fa fi fo fr fuv fy ga gcf gcr gd gl gom grc gu gug guw ha hbo he hi hr ht hu hy id ig is it ja jv ka kab kik kk
    km kn ko ku ky la lb lg lij ln lo lt ltg lv mg mk ml mn mr ms mt my ne nl nn no nso oc om or pa pcm pl ps pt qu ro ru
    rw sa sdh se si sk sl sn so sq sr st sv sw ta te tg th tk tl tr tt ug uk ur uz uzs vec vi vo wa wuu xh yo yue zh zu
    zxx""".split())


def load_identifier(stage=None):
    """py3langid's identifier, whose model ships inside its package."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


class LanguageFilter(FilterStage):
    """The stage runs in Ray tasks rather than an actor, so that it fuses with the stages
    around it into the task workers Ray has already started: an actor would start a process
    of its own (importing Ray Data again) and leave those workers idle. A worker runs many
    tasks, so the model still loads once per process."""

    name = "language"
    pinned = ("languages", "max_chars", "min_score", "text_field")
    identifier = PerProcess(load_identifier)

    def __init__(self, languages: tuple[str, ...] | list[str] = (), min_score: float = 0.0,
                 text_field: str = TEXT_FIELD, max_chars: int = 4000):
        if not 0.0 <= min_score <= 1.0:
            raise ConfigError(f"language score threshold must be between 0 and 1, got {min_score}")
        self.languages = sorted({code.strip().lower() for code in languages if code.strip()})
        problem = unknown_codes(self.languages, PY3LANGID_LANGUAGES, "py3langid's model (--pipeline commoncrawl)")
        if problem:
            raise ConfigError(problem)
        self.min_score, self.max_chars = min_score, max_chars
        super().__init__(text_field)

    def writes(self) -> tuple[str, ...]:
        return LANGUAGE_FIELD, LANGUAGE_SCORE_FIELD

    def needs(self) -> tuple[Requirement, ...]:
        return (module("py3langid"),)

    def setup(self) -> None:
        self.identifier

    def score(self, table, text):
        classify = self.identifier.classify
        found = [classify(t[: self.max_chars]) if t else ("und", 0.0) for t in text.to_pylist()]
        language = pa.array([code for code, _ in found], pa.string())
        score = pa.array([round(float(p), 4) for _, p in found], pa.float64())
        table = table.append_column(LANGUAGE_FIELD, language).append_column(LANGUAGE_SCORE_FIELD, score)
        rules = {}
        if self.languages:
            rules["not_kept"] = pc.is_in(language, value_set=pa.array(self.languages))
        rules["low_score"] = pc.greater_equal(score, self.min_score)
        return table, rules
