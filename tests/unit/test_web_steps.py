"""A web pipeline's stage brings its run options, as a filter of the default pipeline does: a
toy stage with an option, added to ``--pipeline fineweb`` in one line, is in ``run --help``,
refused for the pipelines without it, given its value and pinned by the pipeline's fingerprint."""

from __future__ import annotations

import pyarrow as pa
import pytest

from curator_array.cli import main
from curator_array.core.options import RunOption
from curator_array.pipelines.fineweb import FINEWEB
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import load_pipeline
from curator_array.pipelines.steps import Step
from curator_array.run.option_table import run_options, unused_options
from curator_array.stages.filters import FilterStage
from curator_array.stages.tasks import DocumentBatch


class ShortPageFilter(FilterStage):
    """Drops pages of fewer than ``min_chars`` characters: a toy stage of the fineweb pipeline."""

    name = "short_page"
    pinned = ("min_chars", "text_field")

    def __init__(self, min_chars: int, text_field: str = "text"):
        self.min_chars = min_chars
        super().__init__(text_field)

    def keep(self, text):
        return pa.array([len(t) >= self.min_chars for t in text.to_pylist()])


MIN_PAGE_CHARS = RunOption("min_page_chars", "fineweb: drop pages shorter than this.", "int", "web", minimum=0,
                           default=0)
SHORT_PAGES = Step("short_pages", lambda values, options: ShortPageFilter(values["min_page_chars"], options.text_field),
                   (MIN_PAGE_CHARS,))


@pytest.fixture
def short_pages():
    FINEWEB.add(SHORT_PAGES, after="language")
    yield
    FINEWEB.remove(SHORT_PAGES.name)


def test_a_stage_brings_its_option_to_help_the_pipeline_and_its_fingerprint(short_pages, capsys, tmp_path):
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--min-page-chars INTEGER RANGE" in text and "(env: MIN_PAGE_CHARS)" in text
    row = next(option for option in run_options() if option.name == "min_page_chars")
    assert row.pipelines == ("fineweb",)
    assert [o.name for o in unused_options("commoncrawl", {"min_page_chars"})[1]] == ["min_page_chars"]
    assert unused_options("fineweb", {"min_page_chars"})[1] == []

    options = PipelineOptions.of(tmp_path, tmp_path / "out", input_file_type="warc", min_page_chars=30)
    pipeline = load_pipeline("fineweb", options)
    names = [stage.stage_name for stage in pipeline.stages]
    assert names[names.index("language") + 1] == "short_page"
    params = next(s["params"] for s in pipeline.fingerprint()["stages"] if s["name"] == "short_page")
    assert params == {"min_chars": 30, "text_field": "text"}
    stage = pipeline.stages[names.index("short_page")]
    kept = stage.process(DocumentBatch("t", table=pa.table({"text": ["a page long enough to be kept, surely", "tiny"]})))
    assert kept.table["text"].to_pylist() == ["a page long enough to be kept, surely"]
    assert kept.counters.dropped == {"short_page": 1}


def test_each_pipeline_fills_in_its_own_defaults_of_a_shared_option(tmp_path):
    unset = PipelineOptions.of(tmp_path, tmp_path / "out", input_file_type="warc")
    given = PipelineOptions.of(tmp_path, tmp_path / "out", input_file_type="warc", languages=["de"],
                               min_language_score=0.3)
    assert FINEWEB.values(unset)["languages"] == ("en",) and FINEWEB.values(unset)["min_language_score"] == 0.65
    assert FINEWEB.values(given)["languages"] == ("de",) and FINEWEB.values(given)["min_language_score"] == 0.3
    assert unset.languages == () and given.languages == ("de",)  # as a builder of the user's own reads them
    languages = {name: next(s for s in load_pipeline(name, unset).fingerprint()["stages"]
                            if s["name"] == "language")["params"]["languages"]
                 for name in ("commoncrawl", "fineweb")}
    assert languages == {"commoncrawl": [], "fineweb": ["en"]}
