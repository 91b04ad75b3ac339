"""A stage declares what it is: what it pins in the run contract, the columns it reads and
writes, what it needs installed, and the state it keeps per process. The declarations are
checked here against what the stages do."""

from __future__ import annotations

import importlib
import os
import pickle
import pkgutil

import pytest

import curator_array
from curator_array.core.errors import ConfigError
from curator_array.formats.jsonl import JsonlReader, JsonlWriter
from curator_array.formats.parquet import ParquetReader, ParquetWriter
from curator_array.formats.warc import WarcReader
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import Pipeline, load_pipeline
from curator_array.stages.apply import apply_stage
from curator_array.stages.base import ProcessingStage, SourceStage, _Stage, stage_parameters
from curator_array.stages.download import DownloadStage
from curator_array.stages.filters import ExactDuplicateFilter, NonEmptyTextFilter, WordCountFilter
from curator_array.stages.partition import FilePartitioningStage
from curator_array.stages.process_state import PerProcess
from curator_array.stages.tasks import FileGroupTask
from curator_array.stages.urls import UrlListStage
from curator_array.stages.web.extract import HtmlExtractor
from curator_array.stages.web.fasttext_language import FastTextLanguageFilter
from curator_array.stages.web.fineweb_quality import FineWebQualityFilter
from curator_array.stages.web.language import LanguageFilter
from curator_array.stages.web.pii import PiiFormatter
from curator_array.stages.web.provenance import WarcProvenance
from curator_array.stages.web.quality import (
    C4QualityFilter,
    GopherFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)
from curator_array.stages.web.url_filter import UrlFilter
from tests.support.warcs import Page, write_warc
from tests.web_pages import ARTICLES, TITLES, html_page

# Attributes the stages were never pinned by (how hard to try, where things are, what helpers
# allocate with): before stages declared what they pin, these were left out by name.
NEVER_PINNED = {
    HtmlExtractor: {"timeout_s", "allocator"},
    FastTextLanguageFilter: {"model_path"},
    UrlFilter: {"extra_domains", "extra_urls", "lists_dir"},
    UrlListStage: {"url_lists"},
    DownloadStage: {"retries", "timeout", "backoff_base_s", "backoff_max_s", "max_requests_per_second"},
    # where a streamed task's files roll over and where they go (a path was never pinned), not what they hold
    JsonlWriter: {"file_size", "output_dir"},
    ParquetWriter: {"file_size", "output_dir"},
}


def set_values(params: dict) -> dict:
    return {key: value for key, value in params.items() if value is not None}


def built_in_stages(tmp_path) -> list[_Stage]:
    (tmp_path / "urls.txt").write_text("https://example.com/a.warc.gz\n")
    with_extras = UrlFilter(extra_domains=("blocked.example",))
    keeping = WordCountFilter(3, 50)
    keeping.keep_removed = True
    return [NonEmptyTextFilter(), keeping, WordCountFilter(None, 9, "body"), ExactDuplicateFilter(),
            FilePartitioningStage(tmp_path, "jsonl", 2), UrlListStage([str(tmp_path / "urls.txt")], 1, "https://x/"),
            DownloadStage(tmp_path), HtmlExtractor(), HtmlExtractor("trafilatura", timeout_s=2.0),
            LanguageFilter(("en", "de"), 0.5), FastTextLanguageFilter(), UrlFilter(), with_extras, PiiFormatter(),
            WarcProvenance(), GopherQualityFilter(), GopherRepetitionFilter(), GopherFilter(), C4QualityFilter(),
            FineWebQualityFilter(), JsonlReader("skip"), ParquetReader(), WarcReader(records_per_batch=7),
            JsonlWriter(tmp_path), ParquetWriter(tmp_path)]


def test_declared_settings_pin_what_runs_pinned_before_declarations(tmp_path):
    """A run pinned by an earlier release starts again: each built-in stage pins exactly the
    attributes it was pinned by when every public attribute was (unset ones aside)."""
    for stage in built_in_stages(tmp_path):
        inferred = {key: value for key, value in stage_parameters(stage).items()
                    if key not in NEVER_PINNED.get(type(stage), set())}
        assert set_values(stage.pinned_settings()) == set_values(inferred), type(stage).__name__


def test_every_built_in_stage_declares_what_it_pins():
    """``pinned`` is not inherited (a subclass may compute with more), so each class says it."""
    undeclared = []
    for info in pkgutil.walk_packages(curator_array.__path__, "curator_array."):
        module = importlib.import_module(info.name) if ".stages" in info.name or ".formats" in info.name \
            or info.name.endswith(("recording", "examples.quality")) else None
        for value in vars(module).values() if module else ():
            if (isinstance(value, type) and issubclass(value, (ProcessingStage, SourceStage))
                    and value.__module__ == info.name and vars(value).get("name") and "pinned" not in vars(value)):
                undeclared.append(f"{info.name}.{value.__name__}")
    assert not undeclared, undeclared


def rows_by_id(tasks) -> dict[str, dict]:
    """Each page's row, by its WARC record id (what a filter keeps is compared row by row)."""
    return {row["id"]: row for task in tasks if hasattr(task, "table") for row in task.table.to_pylist()}


def test_the_columns_a_stage_declares_are_those_it_reads_and_writes(tmp_path):
    """FineWeb's chain, stage by stage, over pages in two languages: each stage finds the
    columns it says it reads, and adds or changes no column it does not say it writes."""
    pages = [Page(f"https://site.example/{language}/{i}", html_page(TITLES[language], ARTICLES[language], language).encode())
             for language in ("en", "de") for i in range(3)]
    write_warc(tmp_path / "a.warc.gz", pages)
    options = PipelineOptions.of(tmp_path, tmp_path / "out", input_file_type="warc", languages=("en", "de"))
    stages = load_pipeline("fineweb", options).stages[:-1]  # the writer reads every column
    tasks = [FileGroupTask("t", {"source_files": ["a.warc.gz"]}, files=[str(tmp_path / "a.warc.gz")])]
    for stage in stages:
        before = rows_by_id(tasks)
        columns = {name for row in before.values() for name in row}
        assert set(stage.reads()) <= columns or not before, f"{stage.stage_name} reads what is not there"
        tasks = list(apply_stage(stage, tasks))
        assert tasks and not [t for t in tasks if type(t).__name__ == "FailedTask"], stage.stage_name
        after = rows_by_id(tasks)
        assert after, f"{stage.stage_name} left no page to check the next stage on"
        changed = {name for page, row in after.items() for name, value in row.items()
                   if name not in before.get(page, {}) or before[page][name] != value}
        declared = stage.writes()
        assert declared is None or changed <= set(declared), f"{stage.stage_name} writes {changed - set(declared)}"


def test_a_stage_that_reads_a_column_no_stage_before_it_writes_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"stage 'language' reads 'body', which no stage before it writes \(they "
                                          r"write content_type, date, html, id, url\)"):
        Pipeline(FilePartitioningStage(tmp_path, "warc"), [WarcReader(), LanguageFilter(text_field="body"),
                                                           ParquetWriter(tmp_path)])


class Counted(ProcessingStage):
    """A stage whose per-process state counts how often it was made."""

    name = "counted"
    pinned = ("label",)
    made: list[int] = []
    state = PerProcess(lambda stage: Counted.made.append(os.getpid()) or object(), key=lambda stage: stage.label)

    def __init__(self, label: str):
        self.label = label
        super().__init__()


def test_per_process_state_is_made_once_per_process_and_never_pickled():
    first, twin, other = Counted("a"), Counted("a"), Counted("b")
    assert first.state is twin.state and first.state is not other.state and len(Counted.made) == 2
    copy = pickle.loads(pickle.dumps(first))
    assert "state" not in vars(copy) and copy.state is first.state, "in this process, the state it already has"
    child = os.fork()
    if child == 0:  # a forked worker makes its own
        os._exit(0 if first.state is not Counted.state.made(twin) or len(Counted.made) == 3 else 1)
    assert os.waitpid(child, 0)[1] == 0
