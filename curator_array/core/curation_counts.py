"""The first phase's figures, declared as every phase's are: one ``Counts``.

Its fields are named as a completion manifest's ``work`` names them (the spec's ``rows_in``
and ``rows_out`` among them), so the one ``Counts`` codec reads a manifest of any release
(``CurationCounts.from_json(manifest["work"])``) and status, ``status --json`` and the
report render the first phase as they render any other. A counter that stages keep per
task (lines removed, documents each rule would drop) is a ``tally`` field: declared here,
it travels from the stage through task records, manifests and status (``core.tallies``)
without another module naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .counts import BREAKDOWN, Counts, breakdown, record
from .records.contamination import Contamination

TALLY = "tally"


def tally(record_key: str, title: str) -> Any:
    """A ``dict[str, int]`` field that stages count per task under ``<step>.<rule>`` keys
    (``Task.counters.with_tally``): ``record_key`` is its key in a task record line,
    ``title`` what status and the report call it."""
    return field(default_factory=dict, metadata={"kind": BREAKDOWN, "title": title, TALLY: record_key})


@dataclass(frozen=True)
class CurationCounts(Counts):
    """What the first phase's shards did, under the keys of their manifests' ``work``."""

    RATE = "rows_in"
    source_tasks: int = 0
    rows_in: int = 0
    rows_out: int = 0
    bytes_in: int = 0
    output_file_count: int = 0
    tasks_without_output: int = 0  # finished with every document dropped: they wrote no file
    tokens: int = 0  # of the documents written, when the run counts them (--tokenize)
    rows_dropped_by_stage: dict = breakdown("Documents dropped, by step and rule")
    records_skipped: dict = breakdown("Input records skipped (--malformed skip), by kind")
    lines_removed: dict = tally("l", "Lines removed from the documents kept, by line modifier")
    would_drop_any: dict = tally("w", "Documents each rule would drop, whether or not an earlier rule would (--annotate)")
    contamination: Contamination = record(Contamination)  # what decontamination found (--decontaminate)


def tally_fields() -> list:
    """The ``tally`` fields of ``CurationCounts``, in declaration order."""
    return [item for item in fields(CurationCounts) if TALLY in item.metadata]
