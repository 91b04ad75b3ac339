"""A real run with a failed shard: progress lines in its log, `status`, and the HTML report
opened in headless Chromium (a Debian package), as a person would see it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from curator_array.core.sharding import shard_of
from curator_array.stages.partition import group_task_id
from tests.conftest import curator_here, need
from tests.integration.test_reliability import SMALL, shard_env

pytestmark = pytest.mark.ray
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    if not shutil.which("chromium") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], env=env, capture_output=True)
    need(shutil.which("chromium") is not None, "Chromium is not installed (apt-get install chromium)")
    return shutil.which("chromium")


def open_in_browser(page, work) -> tuple[str, str]:
    """The DOM after rendering, and everything the page logged to its console."""
    common = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={work / 'profile'}"]
    dom = subprocess.run([*common, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    shot = subprocess.run([*common, "--window-size=1200,2400", f"--screenshot={work / 'report.png'}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and shot.returncode == 0, dom.stderr[-2000:] + shot.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    return dom.stdout, "\n".join(console)


def test_the_console_check_can_fail(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    _, console = open_in_browser(page, tmp_path)
    assert "undefinedFunction is not defined" in console


@pytest.mark.usefixtures("run_cluster")
def test_progress_status_and_report_of_a_run_with_a_failed_shard(sample_jsonl, tmp_path):
    (sample_jsonl / "zz-bad.jsonl").write_text('{"text": "fine"}\n{"text": broken\n')
    bad_shard = shard_of(group_task_id(["zz-bad.jsonl"]), 2)
    out = tmp_path / "out"
    slow = ["--pipeline", "tests.slurm.slow_pipeline:build", "--progress-interval", "1"]
    codes = {}
    for index in range(2):
        result = curator_here("run", "--input-dir", str(sample_jsonl), "--output-dir", str(out), *SMALL, *slow,
                              env={**shard_env(index, 2), "SLOW_SECONDS": "0.4"}, check=False)
        codes[index] = result.returncode
        if index != bad_shard:
            progress = [line for line in result.stderr.splitlines() if re.search(r": progress: \d", line)]
            assert progress and re.search(r"progress: \d+/\d+ tasks, [\d,]+ rows/s, [\d.]+ MB/s, elapsed 0:00:\d\d, "
                                          r"ETA \d:\d\d:\d\d", progress[-1]), result.stderr[-3000:]
            assert re.search(r"finished: (\d+)/\1 tasks", result.stderr), result.stderr[-3000:]
    assert codes == {bad_shard: 3, 1 - bad_shard: 0}

    status = curator_here("status", "--checkpoint-path", str(out))
    assert "complete     1/2" in status.stdout and "zz-bad.jsonl: line 2: malformed JSON record" in status.stdout
    # the complete shard's time per stage: the slow stage sleeps 0.4 s a task, and only it is charged for that
    shown = json.loads(curator_here("status", "--checkpoint-path", str(out), "--json").stdout)
    stages = {s["stage"]: s for s in shown["stages"]}
    assert list(stages) == ["jsonl_reader", "slow", "jsonl_writer", "record"]
    assert stages["slow"]["wall_s"] >= 0.4 * stages["slow"]["outputs"] > 0
    assert all(stages[name]["wall_s"] < stages["slow"]["wall_s"] / 2 for name in ("jsonl_reader", "jsonl_writer"))
    slow_line = next(line for line in status.stdout.splitlines() if line.split()[:1] == ["slow"])
    assert float(slow_line.split()[3]) >= 0.4 * stages["slow"]["outputs"]

    page = tmp_path / "report.html"
    made = curator_here("report", "--checkpoint-path", str(out), "-o", str(page))
    assert made.returncode == 0, made.stderr
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), "the page must load nothing"
    assert "<script" not in text
    dom, console = open_in_browser(page, tmp_path)
    assert console == "", f"the page logged to its console:\n{console}"
    cards = dict((name, int(count.replace(",", ""))) for count, name in
                 re.findall(r'<div class="card[^"]*"><b>([\d,]+)</b>([a-z ]+)</div>', dom))
    assert cards["complete"] == 1 and cards["failed"] == 1 and cards["running"] == cards["pending"] == 0
    manifest_rows = int(re.search(r"([\d,]+) rows in", status.stdout).group(1).replace(",", ""))
    assert cards["rows in"] == manifest_rows > 0
    time_table = dom[dom.index('id="stages"'):dom.index('id="failures"')]
    assert re.search(r"<td>all nodes</td><td>slow</td>", time_table), time_table
    failures = dom[dom.index('id="failures"'):]
    assert f"<td>{bad_shard}</td>" in failures and "zz-bad.jsonl: line 2: malformed JSON record" in failures
    assert f"{bad_shard} 0 0 2" in dom, "the retry fields of the failed shard"
    assert (tmp_path / "report.png").stat().st_size > 20_000, "a screenshot of the rendered page"


@pytest.mark.usefixtures("run_cluster")
def test_the_throughput_chart_of_a_one_shard_run_has_bars(sample_jsonl, tmp_path):
    """The quick start's report, as a person sees it: the chart is not an empty axis."""
    out = tmp_path / "out"
    assert curator_here("run", "--input-dir", str(sample_jsonl), "--output-dir", str(out), *SMALL).returncode == 0
    page = tmp_path / "report.html"
    assert curator_here("report", "--checkpoint-path", str(out), "-o", str(page)).returncode == 0
    dom, console = open_in_browser(page, tmp_path)
    assert console == "", console
    bars = re.findall(r'id="throughput-(\d+)-\d+"', dom)
    assert bars, "no bar with rows in the throughput chart"
    manifest = json.loads((out / ".nemo_curator_metadata" / ".slurm_array_completion" /
                           "completed_slurm_array_0.json").read_text())
    traced = {f"{task}.jsonl": files for task, files in manifest["task_inputs"].items()}
    assert sorted(traced) == sorted(manifest["output_files"]), "each output names the input it was made from"
    assert sorted(f for files in traced.values() for f in files) == sorted(p.name for p in sample_jsonl.iterdir())
