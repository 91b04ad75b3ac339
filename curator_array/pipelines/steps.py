"""The built-in web pipelines as lists of steps: each step brings its run options, as a filter
of the default pipeline does.

A step (``Step``) is one stage of a pipeline with the run options that configure it and how
it is built from their values; a pipeline (``WebPipeline``) is its steps in order, with its
own defaults for some of their options (fineweb keeps English above 0.65, commoncrawl every
language). The option table shows every option of every built-in pipeline's steps, marked
with the pipelines that use it, and ``PipelineOptions`` carries their values by name
(``step_options``). Adding a stage with an option to ``--pipeline fineweb`` is one file with
the stage and its step, and one line in ``FINEWEB``'s list (or ``FINEWEB.add`` from a test).

Light on purpose, as the option table imports it: a step imports its stage when it builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core.options import RunOption
from ..stages import defaults

if TYPE_CHECKING:
    from ..stages.base import ProcessingStage

PipelineOptions = Any  # pipelines.options.PipelineOptions, which imports this module


@dataclass(frozen=True)
class Step:
    """A stage of a web pipeline: ``build(values, options)`` makes it (a stage, or a list of
    them, maybe empty) from the pipeline's values of its steps' options and the run's
    pipeline options."""

    name: str
    build: Callable[[Mapping[str, Any], PipelineOptions], Any]
    options: tuple[RunOption, ...] = ()


@dataclass
class WebPipeline:
    """A built-in web pipeline: its steps in order, and its own defaults of their options
    (used when the run leaves an option unset or empty)."""

    name: str
    steps: list[Step]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    check: Callable[[PipelineOptions], None] | None = None  # refuses options this pipeline cannot read

    def options(self) -> list[RunOption]:
        return [option for step in self.steps for option in step.options]

    def values(self, options: PipelineOptions) -> dict[str, Any]:
        """Each step option's value for this pipeline: the run's, else the pipeline's own
        default, else the option's."""
        given = options.step_options
        return {option.name: given[option.name] if given.get(option.name) not in (None, ()) else
                self.defaults.get(option.name, option.default) for option in self.options()}

    def build(self, options: PipelineOptions) -> list[ProcessingStage]:
        if self.check is not None:
            self.check(options)
        values = self.values(options)
        stages: list[ProcessingStage] = []
        for step in self.steps:
            built = step.build(values, options)
            stages.extend(built if isinstance(built, list) else [built])
        return stages

    def add(self, step: Step, after: str | None = None) -> None:
        """Add ``step`` after the step named ``after`` (default: before the writer, the last)."""
        names = [s.name for s in self.steps]
        if step.name in names:
            raise ValueError(f"{self.name} has a step {step.name} already")
        self.steps.insert(names.index(after) + 1 if after else len(self.steps) - 1, step)

    def remove(self, name: str) -> None:
        self.steps = [s for s in self.steps if s.name != name]


def gathered_options(pipelines: Iterable[WebPipeline]) -> list[RunOption]:
    """Every option of the pipelines' steps once, in the order first met, marked with the
    pipelines that use it."""
    users: dict[str, list[str]] = {}
    rows: dict[str, RunOption] = {}
    for pipeline in pipelines:
        for option in pipeline.options():
            rows.setdefault(option.name, option)
            if pipeline.name not in users.setdefault(option.name, []):
                users[option.name].append(pipeline.name)
    return [replace(row, pipelines=tuple(users[name])) for name, row in rows.items()]


# Options several pipelines' steps share: declared once, here.
LANGUAGES = RunOption("languages", "commoncrawl, fineweb: keep documents in these languages, e.g. en,de,ja.", "list",
                      "web", default=(), default_text=f"all for commoncrawl, "
                      f"{','.join(defaults.FINEWEB_LANGUAGES)} for fineweb")
MIN_LANGUAGE_SCORE = RunOption(
    "min_language_score", "commoncrawl, fineweb: drop documents whose language score is lower.", "float", "web",
    minimum=0, maximum=1, default_text=f"0 for commoncrawl, {defaults.FINEWEB_MIN_SCORE} for fineweb")
LANGUAGE_MODEL = RunOption(
    "language_model", "fineweb, dclm: a fastText language-ID model file (lid.176.bin, GlotLID) instead of the bundled "
    "lid.176.ftz; checked, and copied into the checkpoint, at submit.", "file", "web")
EXTRACT_TIMEOUT = RunOption(
    "extract_timeout", "Seconds a page may take to extract, in a child process that a page which hangs or crashes "
    "the extractor cannot stall or kill; such pages are dropped and counted.", "float", "web", minimum=0,
    minimum_open=True, default_text="1 for fineweb; none (in process) for commoncrawl")
URL_BLOCKLIST = RunOption(
    "url_blocklist", "fineweb, dclm: a site's own block list on top of FineWeb's, one domain (or, for fineweb, URL) "
    "a line; repeatable; copied into the checkpoint at submit.", "files", "web", default=())


def _downloads(values, options):
    return options.downloads()


def _warc_reader(values, options):
    from ..formats.warc import WarcReader

    return WarcReader(records_per_batch=options.records_per_batch)


def _writer(values, options):
    from ..formats import writer_for

    return writer_for(options.output_file_type or "parquet", options.written_dir)


def _rules(options):
    from ..stages.web.languages import language_rules

    return language_rules(options.quality_settings)


def _gopher(values, options):
    from ..stages.web.quality import GopherFilter

    return GopherFilter(text_field=options.text_field, rules=_rules(options))


def _c4(values, options):
    from ..stages.web.quality import C4QualityFilter

    return C4QualityFilter(text_field=options.text_field, rules=_rules(options))


def _fineweb_lines(values, options):
    from ..stages.web.fineweb_quality import FineWebQualityFilter

    return FineWebQualityFilter(text_field=options.text_field, rules=_rules(options))


DOWNLOADS = Step("downloads", _downloads)
WARC_READER = Step("warc_reader", _warc_reader)
GOPHER = Step("gopher", _gopher)
C4 = Step("c4", _c4)
FINEWEB_LINES = Step("fineweb_lines", _fineweb_lines)
WRITER = Step("writer", _writer)  # Parquet unless --output-file-type says otherwise


def reads_warc(pipeline: str) -> Callable[[PipelineOptions], None]:
    """The check of a pipeline that reads WARC files only."""
    def check(options: PipelineOptions) -> None:
        from ..core.errors import ConfigError

        if not (options.url_lists or options.crawl) and options.input_file_type != "warc":
            raise ConfigError(f"the {pipeline} pipeline reads WARC files: give --crawl or --input-urls, "
                              "or --input-file-type warc")
    return check
