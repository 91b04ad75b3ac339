"""The filters of the default pipeline, in their order: one line each in ``FILTERS``.

A filter (``stages.filters.FilterStage``) declares its run options and builds itself from
their values (``from_options``). The run's option table shows every registered filter's
options, and the default pipeline (read, filters, write) runs each filter whose options
ask for it. Adding a filter to the default pipeline is one file with the filter and its
options, and one line below (or ``FILTERS.register`` from a plugin or a test).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..core.options import RunOption
from ..stages.filters import ExactDuplicateFilter, FilterStage, NonEmptyTextFilter, WordCountFilter
from ..stages.selection import WhereFilter


class FilterRegistry:
    """Filter classes in the order the default pipeline runs them."""

    def __init__(self, filters: Iterable[type[FilterStage]]):
        self._filters = list(filters)

    def __iter__(self) -> Iterator[type[FilterStage]]:
        return iter(self._filters)

    def register(self, filter_class: type[FilterStage]) -> None:
        """Add a filter after the others."""
        taken = {option.name for option in self.options()}
        clashing = [option.name for option in filter_class.options if option.name in taken]
        if filter_class in self._filters or clashing:
            raise ValueError(f"{filter_class.__name__} is registered already, or its options are taken: {clashing}")
        self._filters.append(filter_class)

    def unregister(self, filter_class: type[FilterStage]) -> None:
        self._filters = [f for f in self._filters if f is not filter_class]

    def options(self) -> list[RunOption]:
        return [option for filter_class in self._filters for option in filter_class.options]

    def build(self, values: Mapping[str, Any], text_field: str) -> list[FilterStage]:
        """The filters ``values`` (run option → value) ask for, in order."""
        built = (filter_class.from_options(values, text_field) for filter_class in self._filters)
        return [stage for stage in built if stage is not None]


FILTERS = FilterRegistry([
    NonEmptyTextFilter,
    WordCountFilter,
    ExactDuplicateFilter,
    WhereFilter,  # last: a selection over what the rules decided, as a selection from an annotated run is
])
