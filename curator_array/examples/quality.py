"""An example user pipeline: a custom filter between the built-in reader and writer.

Run it with::

    curator-array run --pipeline curator_array.examples.quality:build_pipeline \\
        --input-dir sample_data/jsonl --output-dir out/

A pipeline builder receives the ``PipelineOptions`` of the run (input and output paths,
file types, filter switches) and returns the list of stages. When the list does not start
with a source stage, the run's ``FilePartitioningStage`` is used, so sharding, manifests
and retries work exactly as for the default pipeline. The list must end in a writer.

A filter subclasses ``FilterStage`` and implements ``keep(text)`` (a boolean mask over the
text column) or, to add columns, ``score(table, text)``; the base class counts the rows it
drops, per filter, in the completion manifest. Other stages subclass ``ProcessingStage``.
Keep stages free of Ray imports; the executor adapts them.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..pipelines.options import PipelineOptions
from ..stages.base import ProcessingStage
from ..stages.defaults import TEXT_FIELD
from ..stages.filters import FilterStage


class AlphabeticRatioFilter(FilterStage):
    """Keeps documents whose text is mostly letters and spaces, and records the ratio.

    Boilerplate (menus, tables of numbers, markup debris) scores low. The ratio is added as
    a column so later analysis can tune the threshold without rerunning everything.
    """

    name = "alphabetic_ratio"
    pinned = ("minimum_ratio", "text_field")  # what it decides with: pinned in run.json

    def __init__(self, minimum_ratio: float = 0.8, text_field: str = TEXT_FIELD):
        self.minimum_ratio = minimum_ratio
        super().__init__(text_field)

    def writes(self) -> tuple[str, ...]:
        return ("alphabetic_ratio",)

    def score(self, table, text):
        text = pc.fill_null(text, "")
        letters = pc.utf8_length(pc.replace_substring_regex(text, r"[^\p{L}\s]", ""))
        total = pc.max_element_wise(pc.utf8_length(text), 1)
        ratio = pc.divide(pc.cast(letters, pa.float64()), pc.cast(total, pa.float64()))
        return table.append_column("alphabetic_ratio", ratio), pc.greater_equal(ratio, self.minimum_ratio)


def build_pipeline(options: PipelineOptions) -> list[ProcessingStage]:
    """Reader → the filters switched on by flags → alphabetic ratio → writer."""
    return [options.reader(), *options.filters(), AlphabeticRatioFilter(0.8, options.text_field), options.writer()]
