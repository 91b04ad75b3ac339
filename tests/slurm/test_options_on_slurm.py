"""A user's run variables reach every element on the real SLURM cluster, through Apptainer's
``--cleanenv``, via ``submit`` and via a plain ``sbatch``; the outputs are what they ask for.

Apptainer itself cannot run here (no Debian 12 package): a fake ``apptainer`` that applies
its environment rules (``tests/support/fake_runtimes.py``) runs the element on the host,
the checkout standing in for the image. Everything else is real: the rendered site script,
sbatch, srun, the entrypoint, Ray, the pipeline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from curator_array.core.layout import CheckpointLayout
from curator_array.core.records.shard import CompletionManifest
from tests.conftest import REPO, read_records
from tests.slurm.conftest import wait_for
from tests.support.fake_runtimes import install_fakes
from tests.support.warcs import write_warc
from tests.web_pages import pages

pytestmark = [pytest.mark.slurm, pytest.mark.ray]
VENV = REPO / ".venv" / "bin"
# The checkout as the image: its venv is the image's.
IMAGE_ENV = {"PATH": f"{VENV}:/usr/bin:/bin", "CURATOR_ARRAY_PYTHON": str(VENV / "python"),
             "RAY_USAGE_STATS_ENABLED": "0"}
SMALL = {"CURATOR_ARRAY_NUM_CPUS": "1", "CURATOR_ARRAY_OBJECT_STORE_MEMORY": str(100 * 2**20),
         "CURATOR_ARRAY_PROGRESS": "0"}


@pytest.fixture(scope="module")
def apptainer_site(slurm_cluster, tmp_path_factory):
    """A rendered Apptainer site on this cluster, and the job environment with the fake first on PATH."""
    root = tmp_path_factory.mktemp("apptainer")
    fakes = install_fakes(root / "bin", ["apptainer"], IMAGE_ENV)
    sites = root / "sites"
    shutil.copytree(REPO / "site_configs" / "templates", sites / "templates")
    (sites / "fake-apptainer.toml").write_text(
        'runtime = "apptainer"\npartition = "debug"\ntime = "00:10:00"\ncpus_per_task = 1\n'
        'image = "/images/curator-array.sif"\nsignal_seconds = 30\n[env]\nTMPDIR = "/tmp"\n')
    subprocess.run([str(VENV / "curator-array"), "render-site", "--sites-dir", str(sites), "fake-apptainer"],
                   check=True, capture_output=True)
    env = dict(os.environ, PATH=f"{fakes}:{VENV}:{os.environ['PATH']}", FAKE_IMAGE_ROOT=str(REPO))
    return sites, env


def log_of(directory: Path, job: str) -> str:
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(directory.glob(f"curator-array_{job}_*.out")))


def malformed_input(directory: Path) -> Path:
    directory.mkdir(parents=True)
    short, long = "two words", "one two three four five six seven"
    lines = [json.dumps({"id": f"d{i}", "text": long if i % 2 else short}) for i in range(12)]
    (directory / "a.jsonl").write_text("\n".join(lines[:6]) + "\n")
    (directory / "b.jsonl").write_text("\n".join([*lines[6:], "{not json"]) + "\n")
    return directory


def test_variables_exported_at_submit_reach_every_element(apptainer_site, tmp_path):
    sites, env = apptainer_site
    data, out = malformed_input(tmp_path / "in"), tmp_path / "out"
    env = dict(env, INPUT_DIR=str(data), OUTPUT_DIR=str(out), MALFORMED="skip", MIN_WORDS="5", **SMALL)
    submitted = subprocess.run([str(VENV / "curator-array"), "submit", "--site", "fake-apptainer", "--sites-dir",
                                str(sites), "--total-shards", "2"], env=env, capture_output=True, text=True,
                               cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.split()[0]
    assert set(wait_for(job, 2).values()) == {"COMPLETED"}, log_of(tmp_path, job)
    records = read_records(out)
    assert sorted(r["id"] for r in records) == sorted(f"d{i}" for i in range(1, 12, 2)), "MIN_WORDS=5 kept the long ones"
    layout = CheckpointLayout(out)
    manifests = [CompletionManifest.read(layout.manifest_path(s)) for s in (0, 1)]
    assert sum(m.work.malformed_records_skipped for m in manifests) == 1, "MALFORMED=skip skipped the bad line"
    status = subprocess.run([str(VENV / "curator-array"), "status", "--checkpoint-path", str(out)], env=env,
                            capture_output=True, text=True).stdout
    assert "malformed=skip (environment)" in status and "min_words=5 (environment)" in status


def test_variables_given_to_a_plain_sbatch_reach_the_element(apptainer_site, tmp_path):
    sites, env = apptainer_site
    warcs, out = tmp_path / "warcs", tmp_path / "out"
    warcs.mkdir()
    records, expected = pages("lang.example")
    write_warc(warcs / "crawl.warc.gz", records)
    env = dict(env, INPUT_DIR=str(warcs), OUTPUT_DIR=str(out), PIPELINE="commoncrawl",
               INPUT_FILE_TYPE="warc", LANGUAGES="de", **SMALL)
    done = subprocess.run(["sbatch", "--parsable", "--array=0", str(sites / "fake-apptainer.sbatch")], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip().split(";")[0]
    assert set(wait_for(job, 1).values()) == {"COMPLETED"}, log_of(tmp_path, job)
    written = read_records(out)
    german = [url for url, e in expected.items() if e["kept"] and e["language"] == "de"]
    assert german and sorted(r["url"] for r in written) == sorted(german), "LANGUAGES=de kept German pages only"
    assert {p.suffix for p in out.iterdir() if not p.name.startswith(".")} == {".parquet"}


def test_a_bad_input_file_is_repaired_on_an_array_as_the_readme_says(apptainer_site, tmp_path):
    """The README's row, for an array: a task fails on a malformed record; the file is fixed;
    `retry --submit --site S -- --repair` runs only what is missing and records the repair."""
    sites, env = apptainer_site
    data, out = malformed_input(tmp_path / "in"), tmp_path / "out"
    env = dict(env, INPUT_DIR=str(data), OUTPUT_DIR=str(out), **SMALL)
    cli = [str(VENV / "curator-array")]
    submitted = subprocess.run([*cli, "submit", "--site", "fake-apptainer", "--sites-dir", str(sites), "--total-shards",
                                "2"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.split()[0]
    states = wait_for(job, 2)
    assert sorted(states.values()) == ["COMPLETED", "FAILED"], log_of(tmp_path, job)
    finished = {p.name: p.stat().st_mtime_ns for p in out.glob("*.jsonl")}
    bad = data / "b.jsonl"
    bad.write_text("".join(line + "\n" for line in bad.read_text().splitlines() if line != "{not json"))
    retried = subprocess.run([*cli, "retry", "--checkpoint-path", str(out), "--submit", "--site", "fake-apptainer",
                              "--sites-dir", str(sites), "--", "--repair"], env=env, capture_output=True, text=True,
                             cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    again = retried.stdout.split()[0]
    assert set(wait_for(again, 1).values()) == {"COMPLETED"}, log_of(tmp_path, again)
    assert {name: mtime for name, mtime in ((p.name, p.stat().st_mtime_ns) for p in out.glob("*.jsonl"))
            if name in finished} == finished, "the finished shard's outputs are untouched"
    assert sorted(r["id"] for r in read_records(out)) == sorted(f"d{i}" for i in range(12))
    status = subprocess.run([*cli, "status", "--checkpoint-path", str(out)], env=env, capture_output=True,
                            text=True).stdout
    assert "input of 1 unfinished task(s)" in status and "(b.jsonl)" in status, status
