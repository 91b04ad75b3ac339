"""HTML → main text, with boilerplate (navigation, footers, cookie banners) removed.

Resiliparse (default, fast, C++), Trafilatura (slower, often more precise), or Trafilatura
with FineWeb's settings (``--pipeline fineweb``). The extractor is loaded once per worker
process. Documents whose page has no main text are dropped and counted; the
HTML column is dropped too, unless ``keep_html``.
"""

from __future__ import annotations

import importlib
from dataclasses import replace

import pyarrow as pa

from ...core.errors import ConfigError
from ...helpers.allocator import MIMALLOC
from ..base import ProcessingStage
from ..defaults import EXTRACTORS, TEXT_FIELD
from ..process_state import PerProcess
from ..removed import removed_rows
from ..requirements import Requirement, module
from ..tasks import DocumentBatch, Task
from .sandbox import ExtractionSandbox, Outcome, resolve

FINEWEB_EXTRACTOR = "trafilatura-fineweb"
DCLM_EXTRACTOR = "resiliparse-dclm"


def resiliparse_text(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True, preserve_formatting=True, alt_texts=False, list_bullets=True)


def dclm_text(html: str) -> str:
    """Main content as DCLM-Pool was extracted: resiliparse's own defaults otherwise."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True)


def trafilatura_text(html: str) -> str:
    import trafilatura

    return trafilatura.extract(html, include_comments=False, include_tables=False, deduplicate=False) or ""


def fineweb_text(html: str) -> str:
    """Trafilatura as FineWeb called it: precision first, repeated blocks removed, no comments,
    tables as trafilatura's default (kept)."""
    import trafilatura

    return trafilatura.extract(html, favor_precision=True, include_comments=False, deduplicate=True) or ""


def forget_seen_blocks() -> None:
    """``deduplicate`` drops a text block seen more than twice before, in any page the process
    extracted since it started: the output of a page would depend on which worker ran which
    pages before it. Forgotten at every batch, a batch's output depends on its pages alone."""
    from trafilatura.deduplication import LRU_TEST

    LRU_TEST.clear()


def _reference(function) -> str:
    return f"{__name__}:{function.__name__}"


# name → (the library it needs, the function as ``module:function``: what the sandbox's child
# imports, and what makes it forget the pages it saw, if it remembers them)
EXTRACT_FUNCTIONS = {
    "resiliparse": ("resiliparse", _reference(resiliparse_text), None),
    "trafilatura": ("trafilatura", _reference(trafilatura_text), None),
    DCLM_EXTRACTOR: ("resiliparse", _reference(dclm_text), None),
    FINEWEB_EXTRACTOR: ("trafilatura", _reference(fineweb_text), _reference(forget_seen_blocks)),
}


class HtmlExtractor(ProcessingStage):
    """``extractor`` is a built-in name (``EXTRACT_FUNCTIONS``) or ``module:function``.

    With ``timeout_s`` each page is extracted in a child process under that deadline
    (``sandbox``): a page that overruns or crashes the extractor is dropped and counted as
    ``html_extract.timeout`` or ``html_extract.error``. Without it pages are extracted in the
    worker itself (resiliparse's C++ needs no guard); an exception still only drops its page.
    """

    name = "html_extract"
    drops_rows = True
    pinned = ("extractor", "html_field", "keep_html", "text_field")  # the deadline and the allocator change no page
    extract = PerProcess(lambda stage: stage._extractor(),
                         key=lambda stage: (stage.extractor, stage.timeout_s, stage.allocator))

    def __init__(self, extractor: str = EXTRACTORS[0], html_field: str = "html", text_field: str = TEXT_FIELD,
                 keep_html: bool = False, timeout_s: float | None = None, allocator: str = MIMALLOC):
        if extractor not in EXTRACT_FUNCTIONS and ":" not in extractor:
            raise ConfigError(f"extractor {extractor!r} is not one of {', '.join(EXTRACTORS)}")
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigError(f"the extraction timeout must be above 0 s, got {timeout_s}")
        self.extractor, self.html_field, self.text_field, self.keep_html = extractor, html_field, text_field, keep_html
        self.timeout_s, self.allocator = timeout_s, allocator
        super().__init__()

    def _entry(self) -> tuple[str, str, str | None]:
        """The module to import, the function as ``module:function``, and its forget function."""
        if self.extractor in EXTRACT_FUNCTIONS:
            return EXTRACT_FUNCTIONS[self.extractor]
        return self.extractor.partition(":")[0], self.extractor, None

    def reads(self) -> tuple[str, ...]:
        return (self.html_field,)

    def writes(self) -> tuple[str, ...]:
        return (self.text_field,)

    def needs(self) -> tuple[Requirement, ...]:
        return (module(self._entry()[0]),)

    def setup(self) -> None:
        self.extract

    def _extractor(self):
        """This process's extractor (and so one sandbox child)."""
        library, reference, forget = self._entry()
        importlib.import_module(library)
        if self.timeout_s is None:
            return _InProcess(resolve(reference), resolve(forget) if forget else (lambda: None))
        return ExtractionSandbox(reference, self.timeout_s, forget, preload=(library,), allocator=self.allocator)

    def cpu_elsewhere_s(self) -> float:
        made = type(self).extract.made(self)
        return made.child_cpu_s if made is not None else 0.0

    def process(self, task: DocumentBatch) -> Task:
        table = task.table
        if table.num_rows == 0 or self.html_field not in table.column_names:
            if table.num_rows and self.html_field not in table.column_names:
                return task.failed(f"no {self.html_field!r} field to extract text from", self.stage_name)
            return task
        outcomes, texts = [], []
        extractor = self.extract
        extractor.forget()
        for html in table.column(self.html_field).to_pylist():
            outcome, text = extractor.extract(html) if html else (Outcome.DONE, "")
            outcomes.append(outcome)
            texts.append(text.strip())
        table = table.append_column(self.text_field, pa.array(texts, pa.large_string()))
        if not self.keep_html:
            table = table.drop_columns([self.html_field])
        reasons = [None if outcome is Outcome.DONE and text else
                   f"{self.stage_name}.{outcome.value if outcome is not Outcome.DONE else 'no_main_text'}"
                   for outcome, text in zip(outcomes, texts)]
        counters = task.counters
        for reason in ("timeout", "error", "no_main_text"):  # a timeout or an error is news only when it happens
            count = reasons.count(f"{self.stage_name}.{reason}")
            if count or reason == "no_main_text":
                counters = counters.with_dropped(f"{self.stage_name}.{reason}", count)
        kept = pa.array([reason is None for reason in reasons])
        task = replace(task, counters=counters)
        return removed_rows(self, task, table, kept, reasons)


class _InProcess:
    """The extractor called in the worker: an exception drops its page, as in the sandbox."""

    child_cpu_s = 0.0

    def __init__(self, function, forget):
        self.function, self.forget = function, forget

    def extract(self, html: str) -> tuple[Outcome, str]:
        try:
            return Outcome.DONE, self.function(html) or ""
        except Exception:  # noqa: BLE001 - an unparsable page has no main text; it is counted, not fatal
            return Outcome.ERROR, ""
