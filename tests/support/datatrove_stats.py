"""datatrove's own stats steps (DocStats, LineStats) over a run's output documents, in the
reference environment (tests.support.reference_site): prints their figures as JSON for the
stats test to compare with ours.

    python -m tests.support.datatrove_stats OUTPUT.jsonl WORK_DIR

The steps' Public Suffix List is the one tldextract bundles (their default fetches it from
the network, which the tests have not), so domains are split as ours are.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.stats import DocStats, LineStats
from datatrove.utils.stats import MetricStatsDict
from tldextract import TLDExtract


def main(documents_file: str, work: str) -> None:
    rows = [json.loads(line) for line in Path(documents_file).read_text(encoding="utf-8").splitlines()]
    documents = [Document(text=row["text"], id=str(n), metadata={"url": row.get("url") or ""})
                 for n, row in enumerate(rows)]
    offline = TLDExtract(suffix_list_urls=(), cache_dir=None)
    for step in (DocStats(f"{work}/doc", groups_to_compute=["summary", "fqdn", "suffix"]),
                 LineStats(f"{work}/line", groups_to_compute=["summary"])):
        step.tld_extractor = offline
        for _ in step.run(iter(documents)):
            pass

    def read(path: str) -> MetricStatsDict:
        return MetricStatsDict.from_dict(json.loads(Path(work, path).read_text()))

    length, lines = read("doc/summary/length/00000.json")["summary"], read("line/summary/n_lines/00000.json")["summary"]
    print(json.dumps({"documents": length.n, "characters": {"sum": length.total, "min": length.min, "max": length.max},
                      "lines": {"sum": lines.total, "min": lines.min, "max": lines.max},
                      "domains": {key: stats.n for key, stats in read("doc/fqdn/length/00000.json").items()},
                      "tlds": {key: stats.n for key, stats in read("doc/suffix/length/00000.json").items()}}))


if __name__ == "__main__":
    main(*sys.argv[1:])
