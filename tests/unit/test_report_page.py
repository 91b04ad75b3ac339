"""The report page is built from a template with autoescaping: whatever a failure reason or
a path holds arrives on the page as text, never as markup."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from curator_array.core.layout import AttemptId, CheckpointLayout
from curator_array.core.records.attempt import AttemptRecord, FailedTaskRecord, JobIdentity
from curator_array.core.records.shard import CompletionManifest, ShardWork
from curator_array.core.sharding import ShardConfig
from curator_array.report.page import write_report
from curator_array.run.phases import PHASES

HOSTILE = "<script>alert('x')</script> \"quoted\" & <b>bold</b>"


class PageReader(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_failure_reasons_and_paths_arrive_as_text(tmp_path):
    layout = CheckpointLayout(tmp_path / f"ckpt {HOSTILE.replace('/', '-')}")
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": 2}))
    CompletionManifest.of(ShardConfig(0, 2), work=ShardWork.of(rows_in=5, rows_out=4,
                                                            rows_dropped_by_stage={HOSTILE: 1})).write(layout)
    attempt = AttemptId(("local_attempt_1",))
    failed = (FailedTaskRecord("task-1", "reader", HOSTILE),)
    AttemptRecord.of(attempt, ShardConfig(1, 2), JobIdentity(hostname="h"), failed_tasks=failed).write(layout, attempt)
    page = write_report(layout, tmp_path / "report.html", PHASES.plan_of).read_text()
    reader = PageReader()
    reader.feed(page)
    assert "script" not in reader.tags, "no value became a tag"
    assert reader.tags.count("b") == 7, "only the count cards' own <b> tags (5 states, rows in, rows out)"
    text = "".join(reader.text)
    assert HOSTILE in text, "the reason reads as the user wrote it"
    assert str(layout.root) in text, "so does the path"
    assert HOSTILE not in page, "nowhere raw in the page source"


def test_without_matplotlib_the_report_names_the_extra_to_install(tmp_path):
    import subprocess
    import sys

    layout = CheckpointLayout(tmp_path / "ckpt")
    layout.completion_dir.mkdir(parents=True)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": 1}))
    code = ("import sys; sys.modules['matplotlib'] = None; from curator_array.cli import main; "
            f"sys.exit(main(['report', '--checkpoint-path', {str(layout.root)!r}, '-o', {str(tmp_path / 'r.html')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("curator-array: error: curator-array report draws its charts with matplotlib: "
                                   "pip install 'curator-array[report]'")
    assert not (tmp_path / "r.html").exists()


def test_empty_charts_say_so_and_counts_get_whole_number_ticks():
    """A chart with nothing to show draws no axes; a count axis has no 0.5 ticks."""
    import pytest

    pytest.importorskip("matplotlib")
    from curator_array.core.counts import Histogram
    from curator_array.report import charts

    empty = [charts.duration_chart([]), charts.rows_chart(0, 0, {}), charts.throughput_chart([], {}),
             charts.histogram_chart(Histogram({}, "sizes", "size", "count"))]
    assert all('id="xtick_1"' not in svg for svg in empty), "no axes without data"
    assert 'id="xtick_1"' in charts.duration_chart([1.0, 2.0, 2.5])
    few = charts.rows_chart(3, 2, {"word_count": 1})
    assert 2 <= few.count('id="xtick_') <= 5, "ticks at 0, 1, 2, 3 rather than every half row"
    shards = charts.duration_chart([1.0, 1.1])
    assert shards.count('id="ytick_') <= 4, "ticks at whole shards"


def test_the_report_links_to_the_dropped_documents_and_counts_skipped_records(tmp_path):
    from curator_array.core.records.run import OptionValue, PinnedRequest

    out = tmp_path / "out"
    layout = CheckpointLayout(out)
    layout.completion_dir.mkdir(parents=True)
    (out / ".removed" / "word_count").mkdir(parents=True)
    request = PinnedRequest({"output_dir": OptionValue(str(out), "flag")})
    request_id = request.write(layout)
    layout.run_file.write_text(json.dumps({"minimum_shard_index": 0, "total_shards": 1, "request": request_id}))
    CompletionManifest.of(ShardConfig(0, 1), work=ShardWork.of(rows_in=5, rows_out=3, rows_dropped_by_stage={
        "word_count": 2, "non_empty_text": 0}, records_skipped={"malformed_lines": 4})).write(layout)
    page = write_report(layout, tmp_path / "report.html", PHASES.plan_of).read_text()
    assert f'href="{(out / ".removed").as_uri()}"' in page
    skipped = page.split("<h3>Input records skipped (--malformed skip), by kind</h3>", 1)[1].split("</table>")[0]
    assert "<tr><td>malformed_lines</td><td>4</td></tr>" in skipped
    assert "<td>curation</td><td>1/1</td>" in page, "the first phase is a row of the phases table"


def test_throughput_has_bars_for_a_short_shard_and_no_holes_between_overlapping_ones():
    """A one-second shard is one bar, not an empty axis; four short shards that overlap give no
    bin without rows between the first and the last (bins fit the run: at least a second)."""
    from datetime import datetime, timedelta, timezone

    from curator_array.report import charts

    def shard(index: int, start: float, seconds: float, rows: int) -> CompletionManifest:
        began = datetime(2026, 12, 5, 8, tzinfo=timezone.utc) + timedelta(seconds=start)
        return CompletionManifest.of(ShardConfig(index, 4), work=ShardWork.of(rows_in=rows), duration_s=seconds,
                                     started_at=began.isoformat(timespec="milliseconds"),
                                     ended_at=(began + timedelta(seconds=seconds)).isoformat(timespec="milliseconds"),
                                     job=JobIdentity(hostname="node-a"))

    times, series = charts.throughput_series([shard(0, 0.0, 1.2, 1200)])
    assert len(times) == 2 and sum(series["node-a"]) > 0
    svg = charts.throughput_chart(times, series)
    assert svg.count('id="throughput-') == 2, "each bin with rows is a bar of its own"
    times, series = charts.throughput_series([shard(i, 0.3 * i, 1.2, 1000) for i in range(4)])
    values = series["node-a"]
    assert times[1] - times[0] == 1.0 and all(v > 0 for v in values), values
    assert abs(sum(v * 1.0 for v in values) - 4000) < 1e-6, "the bars hold every row"
