"""A document's language: the columns that name it, and the language a document without one
is taken to be. Every stage and phase that reads a row's language uses these names."""

LANGUAGE_FIELD = "language"
LANGUAGE_SCORE_FIELD = "language_score"
DEFAULT_LANGUAGE = "en"


def unknown_codes(codes: list[str], known: set[str] | frozenset[str], model: str) -> str | None:
    """Why some of ``codes`` (``--languages``) are not languages ``model`` can name, with the
    nearest ones it can, or None. A code no model answers would drop every document quietly."""
    from difflib import SequenceMatcher

    def nearness(code: str, candidate: str) -> float:  # "english" → en, "jp" → ja before pt
        return (SequenceMatcher(None, code, candidate).ratio() + 0.5 * (code[:1] == candidate[:1])
                + code.startswith(candidate))

    unknown = [code for code in codes if code not in known]
    if not unknown:
        return None
    hints = [f"{code!r} (nearest: {', '.join(sorted(known, key=lambda k: (-nearness(code, k), k))[:3])})"
             for code in unknown]
    return f"--languages: {model} has no language {'; '.join(hints)}: use its codes, such as en, de, ja"
