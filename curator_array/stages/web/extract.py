"""HTML → main text, with boilerplate (navigation, footers, cookie banners) removed.

Resiliparse (default, fast, C++) or Trafilatura (slower, often more precise). Either is
loaded once per worker: the stage is an actor. Documents whose page has no main text
are dropped and counted; the HTML column is dropped too, unless ``keep_html``.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from ...core.errors import ConfigError
from ..base import ProcessingStage
from ..defaults import EXTRACTORS, TEXT_FIELD
from ..tasks import DocumentBatch, Task


def _resiliparse():
    from resiliparse.extract.html2text import extract_plain_text

    def extract(html: str) -> str:
        return extract_plain_text(html, main_content=True, preserve_formatting=True, alt_texts=False,
                                  list_bullets=True)

    return extract


def _trafilatura():
    import trafilatura

    def extract(html: str) -> str:
        return trafilatura.extract(html, include_comments=False, include_tables=False, deduplicate=False) or ""

    return extract


class HtmlExtractor(ProcessingStage):
    name = "html_extract"
    ray_stage_spec = {"is_actor_stage": True}

    def __init__(self, extractor: str = EXTRACTORS[0], html_field: str = "html", text_field: str = TEXT_FIELD,
                 keep_html: bool = False):
        if extractor not in EXTRACTORS:
            raise ConfigError(f"extractor {extractor!r} is not one of {', '.join(EXTRACTORS)}")
        self.extractor, self.html_field, self.text_field, self.keep_html = extractor, html_field, text_field, keep_html
        self._extract = None
        super().__init__()

    def setup(self) -> None:
        if self._extract is None:
            try:
                self._extract = _resiliparse() if self.extractor == "resiliparse" else _trafilatura()
            except ImportError as exc:
                raise ConfigError(f"the {self.extractor} extractor needs the web extras "
                                  f"(pip install 'curator-array[web]'): {exc}") from None

    def __getstate__(self):
        return {**self.__dict__, "_extract": None}

    def _text(self, html: str | None) -> str:
        if not html:
            return ""
        try:
            return self._extract(html).strip()
        except Exception:  # noqa: BLE001 - an unparsable page has no main text; it is counted, not fatal
            return ""

    def process(self, task: DocumentBatch) -> Task:
        self.setup()
        table = task.table
        if table.num_rows == 0 or self.html_field not in table.column_names:
            if table.num_rows and self.html_field not in table.column_names:
                return task.failed(f"no {self.html_field!r} field to extract text from", self.stage_name)
            return task
        texts = [self._text(html) for html in table.column(self.html_field).to_pylist()]
        table = table.append_column(self.text_field, pa.array(texts, pa.large_string()))
        if not self.keep_html:
            table = table.drop_columns([self.html_field])
        kept = table.filter(pa.array([bool(t) for t in texts]))
        counters = task.counters.with_dropped(f"{self.stage_name}.no_main_text", table.num_rows - kept.num_rows)
        return replace(task, table=kept, counters=counters)
