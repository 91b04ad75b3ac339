"""datatrove's FineWeb steps on the pages of a JSONL file: the reference decisions.

Runs in the reference environment (datatrove 0.10.1; trafilatura and fastText's binding are
the ones our environment has, so both sides run the same versions). The steps and their
settings are those of datatrove's ``examples/fineweb.py``; the language model is the file
given (ours), since datatrove would otherwise download ``lid.176.bin``. Each step runs over
the documents the step before it kept, in order, in one process (the extractor in its
sandbox, as datatrove runs it). Prints one JSON object per page: its id, the step that dropped
it (or null) and its final text.

    python reference_fineweb.py PAGES.jsonl MODEL > decisions.jsonl
"""

from __future__ import annotations

import json
import sys
import warnings

warnings.filterwarnings("ignore")

import numpy  # noqa: E402
from datatrove.data import Document  # noqa: E402
from datatrove.pipeline.extractors import Trafilatura  # noqa: E402
from datatrove.pipeline.filters import (  # noqa: E402
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    LanguageFilter,
    URLFilter,
)
from datatrove.pipeline.formatters import PIIFormatter  # noqa: E402


def use_model(model_path: str) -> None:
    """datatrove's language filter on ``model_path`` through fasttext-predict, in this process
    and the ones it forks: datatrove asks for the distribution fasttext-numpy2-wheel and would
    download lid.176.bin; the module it imports (``fasttext.FastText._FastText``) is
    fasttext-predict's, built from fastText's own code, which returns scores as floats where
    fastText's binding returns a numpy array (datatrove calls ``.item()`` on each)."""
    import datatrove.utils._import_utils as imports
    import datatrove.utils.lid as lid
    import fasttext.FastText

    available = imports._is_distribution_available
    imports._is_distribution_available = lambda name: name == "fasttext-numpy2-wheel" or available(name)
    lid.cached_asset_path_or_download = lambda *args, **kwargs: model_path

    class WithNumpyScores(fasttext.FastText._FastText):
        def predict(self, text, k=1, threshold=0.0, **kwargs):
            labels, scores = super().predict(text, k=k, threshold=threshold, **kwargs)
            return labels, numpy.asarray(scores)

    fasttext.FastText._FastText = WithNumpyScores


def steps(timeout: float = 1.0) -> list[tuple[str, object]]:
    """FineWeb's steps as ``examples/fineweb.py`` sets them (English, 0.65), after ``use_model``."""
    return [
        ("url_filter", URLFilter()),
        ("html_extract", Trafilatura(favour_precision=True, timeout=timeout)),
        ("language", LanguageFilter(languages=["en"], language_threshold=0.65)),
        ("gopher_repetition", GopherRepetitionFilter()),
        ("gopher_quality", GopherQualityFilter()),
        ("c4_quality", C4QualityFilter(filter_no_terminal_punct=False)),
        ("fineweb_quality", FineWebQualityFilter()),
        ("pii", PIIFormatter()),
    ]


def main() -> None:
    pages_path, model_path = sys.argv[1], sys.argv[2]
    with open(pages_path, encoding="utf-8") as handle:
        pages = [json.loads(line) for line in handle]
    documents = [Document(text=p["html"], id=p["id"], metadata={"url": p["url"]}) for p in pages]
    dropped_by: dict[str, str] = {}
    use_model(model_path)
    for name, step in steps():
        kept = list(step.run(iter(documents), rank=0, world_size=1))
        survivors = {doc.id for doc in kept}
        dropped_by.update({doc.id: name for doc in documents if doc.id not in survivors})
        documents = kept
    texts = {doc.id: doc.text for doc in documents}
    for page in pages:
        print(json.dumps({"id": page["id"], "dropped_by": dropped_by.get(page["id"]),
                          "text": texts.get(page["id"])}, ensure_ascii=False))


if __name__ == "__main__":
    main()
