"""What an element of a phase counted, typed: the figures its completion manifest holds.

A phase's counts are a dataclass of ``int`` fields, histograms (``histogram``: how many
things have each size), breakdowns (``breakdown``: a figure per name, tokens per
language say) and records of their own (``record``); each field carries what its chart
or table says, so ``status`` and the report render a phase they have never heard of.
Elements add up.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class Counts:
    """A phase element's figures, typed. Subclasses are dataclasses of ``int`` (or
    ``float``) fields, histograms (``histogram``: how many things have each size) and
    breakdowns (``breakdown``: a figure per name, tokens per language say); elements add up.
    ``RATE`` names the figure whose rate per second of element time status shows."""

    RATE: ClassVar[str | None] = None

    def __add__(self, other: Counts) -> Counts:
        values = {}
        for item in fields(self):
            mine, theirs = getattr(self, item.name), getattr(other, item.name)
            if isinstance(mine, dict):
                merged = dict(mine)
                for key, count in theirs.items():
                    merged[key] = merged.get(key, 0) + count
                values[item.name] = dict(sorted(merged.items()))
            else:
                values[item.name] = mine + theirs
        return type(self)(**values)

    def to_json(self) -> dict[str, Any]:
        return {item.name: _field_json(item, getattr(self, item.name)) for item in fields(self)}

    @classmethod
    def from_json(cls, payload: Any) -> Counts:
        """The counts in ``payload``; a missing or mistyped figure takes its default (counts inform)."""
        payload = payload if isinstance(payload, dict) else {}
        values = {}
        for item in fields(cls):
            value = payload.get(item.name)
            if item.metadata.get("kind") == RECORD:
                values[item.name] = item.metadata["type"].from_json(value)
            elif isinstance(value, dict):
                counts = {k: v for k, v in value.items() if _is_number(v)}
                values[item.name] = counts if item.metadata.get("kind") == BREAKDOWN else {
                    int(k): v for k, v in counts.items() if str(k).lstrip("-").isdigit()}
            elif _is_number(value):
                values[item.name] = value
        return cls(**values)

    def figures(self) -> dict[str, int | float]:
        """The scalar figures, for a line of text."""
        return {item.name: value for item in fields(self)
                if not isinstance(value := getattr(self, item.name), dict) and item.metadata.get("kind") != RECORD}

    def histograms(self) -> list[Histogram]:
        """The histograms, with what their charts say (``histogram``'s metadata)."""
        return [Histogram(getattr(self, item.name), item.metadata["title"], item.metadata["size_label"],
                          item.metadata["count_label"])
                for item in fields(self) if item.metadata.get("kind") == HISTOGRAM]

    def breakdowns(self) -> dict[str, dict[str, int]]:
        """The breakdowns by their titles (``breakdown``'s metadata)."""
        return {item.metadata["title"]: getattr(self, item.name) for item in fields(self)
                if item.metadata.get("kind") == BREAKDOWN}


def show_figure(value: float) -> str:
    """A figure as status and the report print it: a count with thousands separators, a
    fraction or threshold to six significant digits."""
    return f"{value:.6g}" if isinstance(value, float) else f"{value:,}"


def worth_showing(values: dict) -> dict:
    """A breakdown as status and the report show it: its counts that are not zero (a
    manifest lists every step, each rule that dropped nothing too) and every fraction."""
    return {key: value for key, value in values.items() if value or isinstance(value, float)}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Histogram:
    """How many things have each size, with the words a chart of it needs."""

    values: dict[int, int]
    title: str
    size_label: str
    count_label: str


HISTOGRAM, BREAKDOWN, RECORD = "histogram", "breakdown", "record"


def _field_json(item: Any, value: Any) -> Any:
    if item.metadata.get("kind") == RECORD:
        return value.to_json() if value else None
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else value


def histogram(title: str, size_label: str, count_label: str) -> Any:
    """A ``dict[int, int]`` counts field: how many ``count_label`` have each ``size_label``."""
    return field(default_factory=dict, metadata={"kind": HISTOGRAM, "title": title, "size_label": size_label,
                                                 "count_label": count_label})


def record(kind: type) -> Any:
    """A field holding a record of its own (``kind``: adds up with ``+``, has ``to_json`` and
    ``from_json``, is false when empty), such as what decontamination found."""
    return field(default_factory=kind, metadata={"kind": RECORD, "type": kind})


def breakdown(title: str) -> Any:
    """A ``dict[str, int]`` (or ``float``) counts field: a figure per name (tokens per
    language, a threshold per model)."""
    return field(default_factory=dict, metadata={"kind": BREAKDOWN, "title": title})
