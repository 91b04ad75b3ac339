"""Progress lines, driven by a fake clock (no sleeping)."""

from curator_array.run.progress import ProgressReporter, clock_text
from curator_array.stages.tasks import FailedTask, TaskCounters, WrittenFiles


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def written(task_id, rows, size):
    return WrittenFiles(task_id, counters=TaskCounters(rows_read=rows, bytes_read=size), files=["x"], rows_written=rows)


def test_lines_every_interval_with_rates_and_an_eta_from_bytes():
    clock, lines = FakeClock(), []
    progress = ProgressReporter(total_tasks=4, total_bytes=4_000_000, interval_s=30, clock=clock, emit=lines.append)
    clock.now += 10
    progress.record(written("a", 100, 1_000_000), finished=True)
    assert not progress.maybe_report(), "not before the interval"
    clock.now += 20
    assert progress.maybe_report()
    assert lines == ["progress: 1/4 tasks, 3 rows/s, 0.0 MB/s, elapsed 0:00:30, ETA 0:01:30"]
    progress.record(written("b", 300, 1_000_000), finished=True)
    progress.record(FailedTask("c", reason="bad"), finished=False)
    clock.now += 75  # two intervals passed: one line, not a burst
    assert progress.maybe_report() and not progress.maybe_report()
    assert lines[-1] == "progress: 2/4 tasks (1 failed), 4 rows/s, 0.0 MB/s, elapsed 0:01:45, ETA 0:01:45"


def test_eta_from_tasks_without_sizes_and_the_final_line():
    clock, lines = FakeClock(), []
    with ProgressReporter(total_tasks=2, interval_s=5, clock=clock, emit=lines.append) as progress:
        clock.now += 10
        progress.record(written("a", 50, 0), finished=True)
        assert progress.line().endswith("ETA 0:00:10")
    assert lines[-1] == "incomplete: 1/2 tasks, 5 rows/s, 0.0 MB/s, elapsed 0:00:10", "no ETA, and not 'finished'"


def test_the_final_line_says_finished_only_when_every_task_succeeded():
    def final(results, error=None):
        lines = []
        try:
            with ProgressReporter(total_tasks=2, interval_s=5, clock=FakeClock(), emit=lines.append) as progress:
                for result in results:
                    progress.record(result, finished=not isinstance(result, FailedTask))
                if error:
                    raise error
        except RuntimeError:
            pass
        return lines[-1].split(",")[0] if lines else None

    assert final([written("a", 1, 0), written("b", 1, 0)]) == "finished: 2/2 tasks"
    assert final([written("a", 1, 0), FailedTask("b", reason="bad")]) == "incomplete: 1/2 tasks (1 failed)"
    assert final([written("a", 1, 0)], RuntimeError("node lost")) is None, \
        "a stopped shard says what is on record once its cluster is down (run.shard), not what reached the driver"


def test_interval_zero_is_silent_and_clock_text():
    lines = []
    with ProgressReporter(3, interval_s=0, emit=lines.append) as progress:
        assert not progress.maybe_report()
    assert lines == [] and clock_text(3725) == "1:02:05"


def test_a_streamed_task_counts_as_its_parts_go_in_and_is_done_when_it_finishes():
    """A WARC's parts reach the progress line as they are appended (``PartShown``), long before
    its file is in place; the written parts then count no rows twice, and the task is done when
    the runner says it finished."""
    from curator_array.stages.tasks import PartShown

    clock = FakeClock()
    progress = ProgressReporter(total_tasks=1, total_bytes=3_000_000, interval_s=30, clock=clock, emit=lambda _: None)
    clock.now += 30
    for part in range(2):
        shown = PartShown("w", counters=TaskCounters(rows_read=256, bytes_read=1_000_000), part=part)
        progress.record(shown, finished=False)
    assert progress.line() == "progress: 0/1 tasks, 17 rows/s, 0.1 MB/s, elapsed 0:00:30, ETA 0:00:15"
    progress.record(WrittenFiles("w", counters=TaskCounters(rows_read=512, bytes_read=2_000_000), files=["x"],
                                 rows_written=500, part=0, parts=2, final=False, shown=True),
                    finished=False)
    assert progress.line().startswith("progress: 0/1 tasks, 17 rows/s"), "not done, no row counted twice"
    progress.record(PartShown("w", counters=TaskCounters(rows_read=100, bytes_read=1_000_000), part=2),
                    finished=False)
    progress.record(WrittenFiles("w", counters=TaskCounters(rows_read=100), files=["y"], part=2, final=True, shown=True),
                    finished=True)
    assert progress.line().startswith("progress: 1/1 tasks, 20 rows/s")

