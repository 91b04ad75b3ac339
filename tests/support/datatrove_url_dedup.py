"""datatrove's exact dedup as a URL dedup, run in the reference environment: the content is our
normalised URL, the priority the text's length (datatrove keeps the highest; it holds 16 bits),
one task reading the curated files in path order so that ties go to the first document.

    python -m tests.support.datatrove_url_dedup CURATED_DIR WORK_DIR   # prints the kept ids, JSON
"""


import json
import sys
from pathlib import Path

from curator_array.dedup.urls import normalized


def url_of(document) -> str:
    return normalized(document.metadata["url"])


def priority_of(document) -> int:
    return min(max(len(document.text), 1), 65535)


def main(curated: str, work: str) -> None:  # no postponed annotations: datatrove reads url_of's return type
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.exact_dedup import (
        ExactDedupConfig,
        ExactDedupFilter,
        ExactDedupSignature,
        ExactFindDedups,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    config = ExactDedupConfig(content_getter=url_of, document_priority=priority_of)
    root = Path(work)
    for steps in ([JsonlReader(curated), ExactDedupSignature(str(root / "signatures"), config)],
                  [ExactFindDedups(str(root / "signatures"), str(root / "duplicates"), config)],
                  [JsonlReader(curated), ExactDedupFilter(str(root / "duplicates"), config),
                   JsonlWriter(str(root / "kept"), compression=None)]):
        LocalPipelineExecutor(steps, tasks=1, logging_dir=str(root / "logs" / str(len(steps))),
                              skip_completed=False).run()
    kept = [json.loads(line)["id"] for path in sorted((root / "kept").glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()]
    print(json.dumps(kept))


if __name__ == "__main__":
    main(*sys.argv[1:3])
