"""datatrove's n-gram decontamination on our records, run in the reference environment:
``python -m tests.support.datatrove_decont EVALS.jsonl DOCS.jsonl DECISIONS.json``.

The index is built by ``NGramsDecontIndexer.compute_hashes`` (its ``run`` imports lighteval
even when the eval records come as documents, and lighteval is not installed here) and saved
as ``run`` saves it, one ``<task>.index.hashes`` file per task; the documents then go through
``NGramsDecontFilter`` with the default ``NGramsDecontConfig``. Prints nothing; writes each
document's id → the task it hit, or null."""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from datatrove.data import Document
from datatrove.pipeline.decont.n_grams import (
    NGramsDecontConfig,
    NGramsDecontFilter,
    NGramsDecontIndexer,
)


def main(evals: str, documents: str, decisions: str) -> None:
    with tempfile.TemporaryDirectory(prefix="datatrove-decont-") as scratch:
        folder = Path(scratch)
        config = NGramsDecontConfig()
        decont = NGramsDecontFilter(str(folder), config=config)
        indexer = SimpleNamespace(config=config, tokenizer=decont.tokenizer, hash_func=decont.hash_func)
        hashes = defaultdict(set)
        for line in Path(evals).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            hashes[record["task"]].update(NGramsDecontIndexer.compute_hashes(indexer, record["text"], record.get("query", "")))
        for task, found in hashes.items():
            np.array(list(found), dtype=config.hash_config.np_descr).tofile(folder / f"{task}.index.hashes")
        result = {}
        for line in Path(documents).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            document = Document(text=record["text"], id=record["id"])
            kept = decont.filter(document)
            result[record["id"]] = None if kept is True else document.metadata["contaminated_task"]
    Path(decisions).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:4])
