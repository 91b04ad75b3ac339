"""Where each page came from, as FineWeb's rows say it: ``dump`` and ``warc_path``.

``warc_path`` is the WARC the page was read from: the URL it was downloaded from, else its
path under the input directory (``io.source_name``), so it does not change with mount points.
``dump`` is the Common Crawl snapshot named in that path (``crawl-data/CC-MAIN-2024-10/...``),
empty for WARCs from elsewhere. The rows then keep only ``columns``, in that order: FineWeb's
schema, without the filters' score columns.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pyarrow as pa

from ...text.language import LANGUAGE_FIELD, LANGUAGE_SCORE_FIELD
from ..base import ProcessingStage
from ..tasks import DocumentBatch, Task

FINEWEB_COLUMNS = ("text", "id", "url", "date", "dump", "warc_path", LANGUAGE_FIELD, LANGUAGE_SCORE_FIELD)
PROVENANCE_COLUMNS = ("dump", "warc_path")
CRAWL_NAME = re.compile(r"crawl-data/(CC-MAIN-\d{4}-\d{2})/")


class WarcProvenance(ProcessingStage):
    name = "provenance"
    pinned = ("columns",)

    def __init__(self, columns: tuple[str, ...] = FINEWEB_COLUMNS):
        self.columns = tuple(columns)
        super().__init__()

    def writes(self) -> tuple[str, ...]:
        return PROVENANCE_COLUMNS

    def keep_columns(self, columns: tuple[str, ...]) -> None:
        self.columns = tuple(dict.fromkeys((*self.columns, *columns)))

    def process(self, task: DocumentBatch) -> Task:
        table = task.table
        if not table.column_names:
            return task
        source = task.metadata.get("source_file", "")
        found = CRAWL_NAME.search(source)
        values = dict(zip(PROVENANCE_COLUMNS, (found.group(1) if found else "", source)))
        for name, value in values.items():
            if name in self.columns and name not in table.column_names:
                table = table.append_column(name, pa.array([value] * table.num_rows, pa.string()))
        return replace(task, table=table.select([c for c in self.columns if c in table.column_names]))
