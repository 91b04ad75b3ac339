"""A pipeline is a source stage plus a list of processing stages.

Users write a function ``build(options) -> list[stage]`` (``options`` is a
``PipelineOptions``, see ``options``) and pass it as ``--pipeline package.module:function``. Without one, the default pipeline reads the
inputs, applies the filters switched on by options, and writes the outputs; with no
filters it copies every record unchanged.
"""

from __future__ import annotations

import copy
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..core.errors import ConfigError
from ..core.fingerprint import PipelineFingerprint
from ..core.phase import PhaseSettings
from ..stages.base import ProcessingStage, SourceStage
from ..stages.defaults import PIPELINE_REMOVED_DIR
from ..stages.io import ReaderStage, WriterStage
from ..stages.requirements import first_missing
from ..storage.places import joined
from .options import BUILT_IN_PIPELINES, PipelineOptions


@dataclass
class Pipeline:
    """A source and the stages after it; the last one writes.

    A pipeline that does not end in a writer is refused here, when it is built: its
    results would never reach a file, yet its shards would be recorded as complete.
    """

    source: SourceStage
    stages: list[ProcessingStage]
    text_field: str | None = None
    phases: PhaseSettings = field(default_factory=PhaseSettings)  # the phases after this one (curation)
    selected_from: Mapping[str, str] | None = None  # the run it reads the output of (--select-from)

    def __post_init__(self) -> None:
        if not isinstance(self.source, SourceStage):
            raise ConfigError(f"the first stage must be a source stage, got {type(self.source).__name__}")
        if not self.stages:
            raise ConfigError("a pipeline needs at least one processing stage after its source")
        names = set()
        for stage in self.stages:
            if not isinstance(stage, ProcessingStage):
                raise ConfigError(f"{stage!r} is not a ProcessingStage")
            stage.validate()
            name = stage.stage_name
            if name in names:
                raise ConfigError(f"two stages are named {name!r}; give each a unique name")
            names.add(name)
        last = self.stages[-1]
        if not isinstance(last, WriterStage):
            raise ConfigError(
                f"the pipeline ends in {last.stage_name!r}, which is not a writer: end it with a WriterStage "
                "(options.writer() in a pipeline builder), or nothing it computes is ever written"
            )
        self._check_columns()

    def _check_columns(self) -> None:
        """Refuse a stage that reads a column no stage before it writes, where the stages
        before it say what they write (``ProcessingStage.writes``; a reader of JSON cannot)."""
        written: set[str] | None = set()
        for stage in self.stages:
            if written is not None:
                missing = [column for column in stage.reads() if column not in written]
                if missing:
                    raise ConfigError(
                        f"stage {stage.stage_name!r} reads {', '.join(map(repr, missing))}, which no stage before it "
                        f"writes (they write {', '.join(sorted(written)) or 'nothing'}): check --text-field, or the "
                        "order of the stages")
            added = stage.writes()
            written = None if added is None or written is None else written | set(added)

    @property
    def writer(self) -> WriterStage:
        """The last stage, a writer (checked when the pipeline is built)."""
        return self.stages[-1]  # type: ignore[return-value]

    @classmethod
    def from_stages(cls, stages: Sequence[object], options: PipelineOptions) -> Pipeline:
        """A builder's list, with the default file source put first when it has none."""
        items = list(stages)
        if items and isinstance(items[0], SourceStage):
            return cls(items[0], items[1:], options.text_field)
        return cls(options.source(), items, options.text_field)

    def fingerprint(self) -> PipelineFingerprint:
        """What the run contract pins: stages with parameters, formats, text field, the later
        phases' settings."""
        reader = next((s for s in self.stages if isinstance(s, ReaderStage)), None)
        writer = self.stages[-1]
        source, *stages = (stage.fingerprint() for stage in (self.source, *self.stages))
        return PipelineFingerprint(
            source=source,
            stages=tuple(stages),
            input=reader.format_name if reader is not None else None,
            output=writer.format_name if isinstance(writer, WriterStage) else None,
            text_field=self.text_field,
            phases=self.phases.fingerprint(),
            selected_from=dict(self.selected_from) if self.selected_from else None,
        )

    def for_run(self, options: PipelineOptions, before_writer: Sequence[ProcessingStage] = ()) -> Pipeline:
        """A copy of this pipeline as a run runs it: followed by the phases ``options`` ask
        for (pinned with its fingerprint), with ``before_writer`` (what those phases need of
        each document: its token count, say) just before its writer, and, with
        ``--keep-removed``, every stage that drops rows keeping them for the writer to write
        under ``OUTPUT_DIR/.removed/pipeline/`` (with ``--annotate``, marking them instead). Its writer must write where the phases look
        (``options.written_dir``)."""
        missing = first_missing([*self.stages, *before_writer])
        if missing:
            raise ConfigError(missing)
        stages = [*self.stages[:-1], *before_writer, copy.copy(self.writer)]
        stages[-1].roll_at(options.output_file_size)
        if options.keep_removed and options.annotate:
            raise ConfigError("--keep-removed with --annotate: an annotated run removes nothing (it marks what a rule "
                              "would drop); give one of them")
        if options.keep_removed or options.annotate:
            stages = [copy.copy(stage) if stage.drops_rows else stage for stage in stages]
            for stage in stages:
                if stage.drops_rows:
                    stage.keep_removed, stage.annotate = options.keep_removed, options.annotate
        if options.keep_removed:
            stages[-1].keep_removed_in(joined(options.output_dir, PIPELINE_REMOVED_DIR))
        if options.annotate:
            stages = _keeping_marks(stages)
        if options.phases.output_staged and Path(self.writer.output_dir).resolve() != Path(options.written_dir).resolve():
            raise ConfigError(
                f"the pipeline writes to {self.writer.output_dir}, but the phases after it read {options.written_dir} "
                f"and write the run's output to {options.output_dir}: build the writer with options.writer() "
                "(or write to options.written_dir)"
            )
        return replace(self, stages=stages, phases=options.phases, selected_from=options.selected_from)


def _keeping_marks(stages: list) -> list:
    """``stages`` with every stage after a rule keeping the marks and the columns the rules
    before it add (a stage that chooses the columns written would drop them)."""
    from ..stages.annotations import FIELDS

    kept, added = [], list(FIELDS)
    for stage in stages:
        if added and type(stage).keep_columns is not ProcessingStage.keep_columns:
            stage = copy.copy(stage)
            stage.keep_columns(tuple(added))
        kept.append(stage)
        if stage.drops_rows:
            added += [column for column in stage.writes() or () if column not in added]
    return kept


def default_pipeline(options: PipelineOptions) -> Pipeline:
    return Pipeline.from_stages(options.default_stages(), options)


def pipeline_for_run(reference: str | None, options: PipelineOptions,
                     before_writer: Sequence[ProcessingStage] = ()) -> Pipeline:
    """The pipeline a run runs: the one ``--pipeline`` names (``reference``), else the
    default one, as ``Pipeline.for_run`` completes it."""
    pipeline = load_pipeline(reference, options) if reference else default_pipeline(options)
    return pipeline.for_run(options, before_writer)


def load_pipeline(reference: str, options: PipelineOptions) -> Pipeline:
    """A built-in pipeline by name, or ``package.module:function`` (the working directory is
    importable), built with ``options``."""
    module_name, _, function_name = BUILT_IN_PIPELINES.get(reference, reference).partition(":")
    if not module_name or not function_name:
        raise ConfigError(
            f"--pipeline {reference!r}: expected a built-in name ({', '.join(sorted(BUILT_IN_PIPELINES))}) "
            "or the form package.module:function"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--pipeline {reference!r}: cannot import {module_name!r} ({exc})") from None
    builder = getattr(module, function_name, None)
    if not callable(builder):
        raise ConfigError(f"--pipeline {reference!r}: {module_name} has no function {function_name!r}")
    stages = builder(options)
    if isinstance(stages, Pipeline):
        if stages.text_field is None:
            stages.text_field = options.text_field
        return stages
    return Pipeline.from_stages(stages, options)
