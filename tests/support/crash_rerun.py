"""A test whose xdist worker died under it runs once more, in a fresh worker.

Tests drive Ray in-process, and a worker that has connected to many clusters in turn
keeps Ray's leftovers from each (a native thread per cluster, measured; see also
ray-project/ray#31145): its death then says little about the test it was running. A
test that crashes a fresh worker too fails as before; the first crash is shown as ``R``
and listed at the end of the run, with what xdist said, so it is never silent.
"""

from __future__ import annotations

from collections import Counter

RERUNS = 1

_crashes: Counter[str] = Counter()
_rerun_reports: list = []


def pytest_handlecrashitem(crashitem, report, sched) -> None:
    _crashes[crashitem] += 1
    requeued_by_scope = hasattr(sched, "workqueue")  # LoadScope queues a crashed worker's work again itself
    if _crashes[crashitem] <= RERUNS:
        if not requeued_by_scope:
            sched.mark_test_pending(crashitem)
        report.outcome = "rerun"
        _rerun_reports.append(report)
        return
    if requeued_by_scope:
        for scope, unit in list(sched.workqueue.items()):
            if crashitem in unit:
                unit[crashitem] = True
                if all(unit.values()):
                    del sched.workqueue[scope]


def pytest_report_teststatus(report):
    if report.outcome == "rerun":
        return "rerun", "R", ("RERUN", {"yellow": True})
    return None


def pytest_terminal_summary(terminalreporter) -> None:
    if _rerun_reports:
        terminalreporter.section("tests run again after their worker crashed", sep="=", yellow=True)
        for report in _rerun_reports:
            terminalreporter.line(f"{report.nodeid}: {report.longrepr}")
