"""URL dedup (#69): ``--dedup urls`` keeps one document per normalised URL, the longest (or the
newest), ties to the first in the run's order, whatever the sharding; datatrove's exact dedup
given the same normaliser and priority keeps the same documents."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from curator_array.dedup.urls import normalized
from tests.conftest import REPO, need
from tests.conftest import curator_here as curator
from tests.integration.test_paragraph_dedup import curated_in_run_order, output_documents
from tests.integration.test_tokenize import run
from tests.support.quality_corpus import paragraphs, write_jsonl

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]


def variant(url: str, rng: random.Random) -> str:
    """The same page as a crawler may find it again."""
    scheme, rest = url.split("://", 1)
    host, _, path = rest.partition("/")
    path, _, query = path.partition("?")
    changes = rng.sample(["scheme", "case", "www", "slash", "fragment", "query", "port"], 3)
    if "scheme" in changes:
        scheme = "http" if scheme == "https" else "https"
    if "case" in changes:
        host = host.upper()
    if "www" in changes:
        host = host[4:] if host.lower().startswith("www.") else "www." + host
    if "port" in changes:
        host += ":443" if scheme == "https" else ":80"
    if "query" in changes and query:
        query = "&".join(reversed(query.split("&")))
    url = f"{scheme}://{host}/{path}" + ("/" if "slash" in changes else "") + (f"?{query}" if query else "")
    return url + ("#section-2" if "fragment" in changes else "")


def planted(count: int = 160, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    texts = [d["text"] for d in paragraphs(200)]
    rng.shuffle(texts)
    documents = []
    for n in range(count):
        url = f"https://www.site{n % 9}.example/docs/page-{n}" + (f"?b={n}&a=1" if n % 3 else "")
        documents.append({"id": f"o{n}", "url": url, "text": texts[n], "date": f"2024-0{1 + n % 9}-11T10:00:00Z"})
        for copy in range(n % 3):  # two in three have copies: longer, shorter or as long
            text = texts[n] + (" " + texts[count + n] if copy == 0 and n % 2 else "") if copy == 0 else texts[n][:-7]
            documents.append({"id": f"o{n}-v{copy}", "url": variant(url, rng), "text": text,
                              "date": f"2025-0{1 + copy}-0{1 + n % 9}T08:30:00+00:00"})
        if n % 10 == 0:  # a different page whose URL looks alike: kept
            documents.append({"id": f"o{n}-other", "url": url.replace("page-", "Page-"), "text": texts[count + n]})
    rng.shuffle(documents)
    return documents


def kept_by_reference(documents: list[dict], newest: bool = False) -> set[str]:
    best: dict[str, tuple] = {}
    for order, doc in enumerate(documents):
        moment = doc.get("date") or ""
        priority = (moment,) if newest else (len(doc["text"]),)
        key = normalized(doc["url"])
        if key not in best or priority > best[key][0]:
            best[key] = (priority, doc["id"])
    return {doc_id for _, doc_id in best.values()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("urls")
    documents = planted()
    for part in range(4):
        write_jsonl(root / "in" / f"part-{part}.jsonl", documents[part::4])
    return root


@pytest.mark.parametrize("keep", ["longest", "newest"])
def test_one_document_per_normalised_url_the_longest_or_the_newest(corpus, tmp_path, keep):
    out = tmp_path / "out"
    run(corpus / "in", out, "--dedup", "urls", "--dedup-url-keep", keep, "--dedup-buckets", "3", shards=2)
    curated = curated_in_run_order(out, 2)
    wanted = kept_by_reference(curated, newest=keep == "newest")
    kept = output_documents(out)
    assert set(kept) == wanted
    assert len(wanted) < len(curated) - 100 and any(i.endswith("-other") for i in kept), "copies gone, look-alikes kept"
    assert any(i.endswith("-v0") for i in kept), "a longer or newer copy is kept instead of the first"
    counts = {p["phase"]: p["counts"] for p in json.loads(
        curator("status", "--checkpoint-path", str(out), "--json").stdout)["phases"]}
    assert counts["url_removal"]["removed"] == len(curated) - len(wanted) == sum(
        c["removed"] for name, c in counts.items() if name == "url_buckets")


def test_datatroves_exact_dedup_on_the_same_urls_keeps_the_same_documents(corpus, tmp_path):
    from tests.support.reference_site import ensure_reference_site, reference_environment

    out = tmp_path / "out"
    run(corpus / "in", out, "--dedup", "urls", shards=1)
    try:
        ensure_reference_site()
    except RuntimeError as problem:
        need(False, str(problem))
    done = subprocess.run([sys.executable, "-m", "tests.support.datatrove_url_dedup", str(out / ".curated"),
                           str(tmp_path / "datatrove")], cwd=REPO, env=reference_environment(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs, ours = set(json.loads(done.stdout.strip().splitlines()[-1])), set(output_documents(out))
    assert len(ours) < len(curated_in_run_order(out, 1)) - 100
    agreement = len(ours & theirs) / len(ours | theirs)
    assert agreement >= 0.999, f"{agreement:.4f} of the kept documents agree ({len(ours)} ours, {len(theirs)} theirs)"
