"""The dedup steps before the document one on the real SLURM cluster (#69): URL and paragraph
phases queued by one `submit`; an element SIGKILLed mid-work in two of them (one writing
documents, one writing n-gram keys: the document dedup's test kills phases of both kinds too),
and each time `retry` names exactly that element and one resubmission finishes the run, with
the output of an uninterrupted local run, byte for byte."""

from __future__ import annotations

import json

import pytest

from tests.slurm.conftest import queued, wait_all
from tests.slurm.test_dedup_on_slurm import (
    GRANTED,
    HOLD,
    SMALL,
    curator,
    kill_when_held,
    local_run,
    retry_fields,
    visible,
)
from tests.slurm.test_faults import render_test_site
from tests.support.planted_paragraphs import planted_documents

pytestmark = [pytest.mark.slurm, pytest.mark.ray, pytest.mark.usefixtures("run_cluster")]
DEDUP = ["--dedup", "urls,paragraphs", "--dedup-buckets", "2"]
PHASES = ("url_keys", "url_buckets", "url_removal", "paragraph_ngrams", "paragraph_buckets", "paragraph_removal")
KILLED = ("url_removal", "paragraph_ngrams")
ELEMENTS = {phase: 2 if phase.endswith("buckets") else 3 for phase in PHASES}


def test_elements_killed_in_url_and_paragraph_phases_are_retried_to_the_uninterrupted_output(slurm_cluster, tmp_path):
    inputs, sites = tmp_path / "in", tmp_path / "sites"
    inputs.mkdir()
    documents = planted_documents(300)
    for part in range(6):
        (inputs / f"part-{part}.jsonl").write_text("".join(
            json.dumps({"id": f"d{i}", "url": f"https://site.example/{i % 250}", "text": documents[i]},
                       ensure_ascii=False) + "\n"
            for i in range(part, len(documents), 6)), encoding="utf-8")
    sites.mkdir()
    render_test_site(sites)
    baseline = tmp_path / "baseline"
    local_run("--input-dir", str(inputs), "--output-dir", str(baseline), *SMALL, *DEDUP)

    out = tmp_path / "out"
    markers = {phase: tmp_path / f"held-{phase}" for phase in KILLED}
    done = curator("submit", "--site", "test-site", "--sites-dir", str(sites), "--total-shards", "3", "--",
                   "--input-dir", str(inputs), "--output-dir", str(out), *GRANTED, *DEDUP,
                   env={HOLD: f"{KILLED[0]}:0:{markers[KILLED[0]]}"}, cwd=sites)
    jobs = queued(done.stdout)
    assert [p for _, p, _ in jobs] == ["curation", *PHASES], done.stdout
    kill_when_held(markers[KILLED[0]], jobs, KILLED[0])
    wait_all(jobs)
    for number, phase in enumerate(KILLED):
        assert retry_fields(out) == f"0 0 0 {ELEMENTS[phase]} {phase}", f"after the kill in {phase}"
        following = KILLED[number + 1] if number + 1 < len(KILLED) else None
        env = {HOLD: f"{following}:0:{markers[following]}"} if following else {}
        done = curator("retry", "--checkpoint-path", str(out), "--submit", "--site", "test-site", "--sites-dir",
                       str(sites), env=env, cwd=sites)
        jobs = queued(done.stdout)
        later = PHASES[PHASES.index(phase) + 1:]
        assert [(p, n) for _, p, n in jobs] == [(phase, 1), *[(p, ELEMENTS[p]) for p in later]]
        if following:
            kill_when_held(markers[following], jobs, following)
        wait_all(jobs)
    assert all(marker.exists() for marker in markers.values()), "every phase had an element killed"
    assert retry_fields(out) == ""
    assert visible(out) == visible(baseline) and visible(out), "the same files, byte for byte"
    report = json.loads(curator("status", "--checkpoint-path", str(out), "--json").stdout)
    counts = {p["phase"]: p["counts"] for p in report["phases"]}
    assert counts["url_removal"]["removed"] == 50
    assert counts["paragraph_removal"]["paragraphs_removed"] > 0 and counts["paragraph_removal"]["documents_emptied"] > 0
