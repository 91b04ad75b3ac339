"""`--stats` on real, multilingual text over three shards: stats.json and `status --json` hold the
figures a reader recomputes from the run's output with pyarrow and plain Python (documents,
characters, words, lines, tokens, languages, domains and TLDs), for the whole run and per group;
a document without a URL is counted, not guessed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.conftest import REPO, need
from tests.conftest import curator_here as curator
from tests.integration.test_annotate_run import SMALL, rows_of, status_of
from tests.support.quality_corpus import paragraphs, write_jsonl
from tests.support.tokenizer import train_tokenizer

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
SUFFIXES = {"www.example.co.uk": "co.uk", "docs.example.org": "org", "news.example.com": "com", "blog.exemple.fr": "fr",
            "example.de": "de"}
HOSTS = [*SUFFIXES, None]


def bin_of(value: int) -> int:
    return 0 if value <= 0 else 2 ** (value.bit_length() - 1)


def expected(rows: list[dict], top: int) -> dict:
    """The figures of ``rows``, computed here without the project's code."""
    texts = [row["text"] for row in rows]
    measures = {"characters": pc.utf8_length(pa.array(texts)).to_pylist(), "words": [len(t.split()) for t in texts],
                "lines": [len(t.split("\n")) for t in texts], "tokens": [row["token_count"] for row in rows]}
    hosts = [row["url"].split("/")[2] if row.get("url") else None for row in rows]
    domains = Counter(host or "(none)" for host in hosts)
    tlds = Counter(SUFFIXES[host] if host else "(none)" for host in hosts)
    figures = {"documents": len(rows), "languages": dict(Counter(row["language"] for row in rows)),
               "domains": dict(sorted(domains.items(), key=lambda kv: (-kv[1], kv[0]))[:top]),
               "distinct_domains": len(domains), "tlds": dict(sorted(tlds.items(), key=lambda kv: (-kv[1], kv[0]))[:top])}
    for name, values in measures.items():
        figures[name] = {"sum": sum(values), "min": min(values), "max": max(values),
                         "histogram": {str(b): n for b, n in sorted(Counter(map(bin_of, values)).items())}}
    return figures


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("stats")
    documents = paragraphs()[::7][:900]  # ten languages
    for n, document in enumerate(documents):
        host = HOSTS[n % len(HOSTS)]
        document["url"] = f"https://{host}/page/{n}" if host else None
        if n % 7 == 0:
            document["text"] = document["text"] + "\n" + document["text"][:40] + "\n"
    for part in range(3):
        write_jsonl(root / "in" / f"part-{part}.jsonl", documents[part::3])
    tokenizer = train_tokenizer([d["text"] for d in documents[:200]], root / "tokenizer.json", 500)
    out = root / "out"
    for shard in range(3):  # the last shard to finish runs the later phases, as outside an array
        curator("run", "--input-dir", str(root / "in"), "--output-dir", str(out), "--min-words", "5", "--stats",
                "--stats-group-by", "language", "--stats-top", "3", "--tokenize", str(tokenizer), *SMALL,
                env={"NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX": str(shard), "NEMO_CURATOR_SLURM_ARRAY_TOTAL_SHARDS": "3"})
    return out


def test_stats_are_what_the_output_holds(run):
    rows = rows_of(run)
    stats = json.loads((run / "stats.json").read_text())
    assert stats["group_by"] == "language" and stats["top"] == 3
    got = stats["groups"]["all"]
    want = expected(rows, 3)
    for name in ("documents", "languages", "domains", "distinct_domains", "tlds"):
        assert got[name] == want[name], name
    for name in ("characters", "words", "lines", "tokens"):
        assert {k: got[name][k] for k in ("sum", "min", "max", "histogram")} == want[name], name
        assert got[name]["mean"] == pytest.approx(want[name]["sum"] / len(rows))
    assert "(none)" in got["tlds"] and len(got["domains"]) == 3 < got["distinct_domains"]
    for language in {row["language"] for row in rows}:
        mine = [row for row in rows if row["language"] == language]
        assert stats["groups"][language]["documents"] == len(mine)
        assert stats["groups"][language]["words"]["sum"] == sum(len(row["text"].split()) for row in mine)
    assert len(stats["groups"]) > 3, "several languages"


def test_status_shows_the_stats_and_their_phases(run):
    status = status_of(run)
    assert status["stats"] == json.loads((run / "stats.json").read_text())
    phases = {phase["phase"]: phase for phase in status["phases"]}
    assert phases["shard_stats"]["complete"] == 3 and phases["stats"]["complete"] == 1
    assert phases["stats"]["counts"]["documents"] == status["stats"]["groups"]["all"]["documents"]


def test_the_report_shows_the_corpus_in_a_browser(run, tmp_path):
    from tests.integration.test_report import open_in_browser

    page = tmp_path / "report.html"
    curator("report", "--checkpoint-path", str(run), "-o", str(page))
    dom, console = open_in_browser(page, tmp_path)
    assert console == "", console
    corpus = dom[dom.index('id="corpus"'):dom.index('id="failures"')]
    stats = json.loads((run / "stats.json").read_text())["groups"]
    assert f"<td>all</td><td>{stats['all']['documents']:,}</td>" in corpus
    shown = re.findall(r"<td>([^<]+)</td><td>([\d,]+)</td>", corpus[corpus.index("most frequent domains"):])
    ranked = sorted(stats["all"]["domains"].items(), key=lambda item: (-item[1], item[0]))
    assert [(name, int(count.replace(",", ""))) for name, count in shown[:len(ranked)]] == ranked, "most frequent first"
    assert corpus.count("<svg") == 4, "characters, words, lines and tokens per document"


def test_datatrove_counts_the_same_documents_characters_lines_and_domains(run, tmp_path):
    """datatrove's DocStats and LineStats on the same documents (its own code, in its own
    environment): equal figures. Words are not compared: datatrove splits them with a
    tokenizer per language, ours at whitespace (docs/stats.md)."""
    from tests.support.reference_site import ensure_reference_site, reference_environment

    try:
        ensure_reference_site()
    except RuntimeError as error:
        need(False, str(error))
    rows = rows_of(run)
    write_jsonl(tmp_path / "documents.jsonl", [{"text": row["text"], "url": row.get("url")} for row in rows])
    done = subprocess.run([sys.executable, "-m", "tests.support.datatrove_stats", str(tmp_path / "documents.jsonl"),
                           str(tmp_path / "work")], capture_output=True, text=True, env=reference_environment(),
                          cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)
    ours = json.loads((run / "stats.json").read_text())["groups"]["all"]
    assert theirs["documents"] == ours["documents"] == len(rows)
    for measure in ("characters", "lines"):
        assert theirs[measure] == {k: ours[measure][k] for k in ("sum", "min", "max")}, measure
    domains = {name or "(none)": count for name, count in theirs["domains"].items()}
    tlds = {name or "(none)": count for name, count in theirs["tlds"].items()}
    assert len(domains) == ours["distinct_domains"]
    assert all(domains[name] == count for name, count in ours["domains"].items())
    assert all(tlds[name] == count for name, count in ours["tlds"].items())
