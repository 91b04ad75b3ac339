"""An example user pipeline: a custom stage between the built-in reader and writer.

Run it with::

    curator-array run --pipeline curator_array.examples.quality:build_pipeline \\
        --input-dir sample_data/jsonl --output-dir out/

A pipeline builder receives the ``PipelineOptions`` of the run (input and output paths,
file types, filter switches) and returns the list of stages. When the list does not start
with a source stage, the run's ``FilePartitioningStage`` is used, so sharding, manifests
and retries work exactly as for the default pipeline.

Your own stages follow the same pattern: subclass ``ProcessingStage``, implement
``process`` (one task in, a task or a list of tasks or None out), and declare resources
and scaling in class attributes. Keep them free of Ray imports; the executor adapts them.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from curator_array.pipeline import PipelineOptions
from curator_array.stages.base import ProcessingStage, Resources
from curator_array.tasks import DocumentBatch, FailedTask, Task


class AlphabeticRatioFilter(ProcessingStage):
    """Keeps documents whose text is mostly letters and spaces, and records the ratio.

    Boilerplate (menus, tables of numbers, markup debris) scores low. The ratio is added as
    a column so later analysis can tune the threshold without rerunning everything.
    """

    name = "alphabetic_ratio"
    resources = Resources(cpus=1.0)
    batch_size = 1

    def __init__(self, minimum_ratio: float = 0.8, text_field: str = "text"):
        self.minimum_ratio = minimum_ratio
        self.text_field = text_field
        super().__init__()

    def process(self, task: DocumentBatch) -> Task:
        table = task.table
        if table.num_rows == 0:
            return task
        if self.text_field not in table.column_names:
            return FailedTask(task.task_id, dict(task.metadata), reason=f"no {self.text_field!r} field")
        text = pc.fill_null(table.column(self.text_field).cast(pa.string()), "")
        letters = pc.utf8_length(pc.replace_substring_regex(text, r"[^\p{L}\s]", ""))
        total = pc.max_element_wise(pc.utf8_length(text), 1)
        ratio = pc.divide(pc.cast(letters, pa.float64()), pc.cast(total, pa.float64()))
        kept = table.append_column("alphabetic_ratio", ratio).filter(pc.greater_equal(ratio, self.minimum_ratio))
        dropped = {**task.metadata.get("dropped", {}), self.stage_name: table.num_rows - kept.num_rows}
        return DocumentBatch(task.task_id, {**task.metadata, "dropped": dropped}, table=kept)


def build_pipeline(options: PipelineOptions) -> list[ProcessingStage]:
    """Reader → the filters switched on by flags → alphabetic ratio → writer."""
    return [options.reader(), *options.filters(), AlphabeticRatioFilter(0.8, options.text_field), options.writer()]
