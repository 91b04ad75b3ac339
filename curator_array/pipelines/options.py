"""The pipeline options: the values a pipeline builder is given (paths, formats, the
values of the default pipeline's filter options, the settings of the later phases), typed.

They are the part of a run request (``run.request``) that decides what the run computes;
the option table (``run.option_table``) names each one's flag and variable. A plain value
with no heavy imports, so a run can parse its options and launch its Ray head before it
imports pyarrow, Ray Data or the stages; each method imports the stage it builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.formats import DEFAULT_FORMAT
from ..core.phase import PhaseSettings
from ..helpers.allocator import MIMALLOC
from ..stages import defaults
from ..storage.places import joined
from ..storage.s3 import is_s3
from . import web
from .filters import FILTERS

# Pipelines addressed by name (``--pipeline commoncrawl``) as well as by module:function.
BUILT_IN_PIPELINES = {"commoncrawl": "curator_array.pipelines.commoncrawl:build",
                      "fineweb": "curator_array.pipelines.fineweb:build",
                      "dclm": "curator_array.pipelines.dclm:build"}
# Where the curation phase writes when dedup phases follow (hidden, like the other dot-dirs).
CURATED_DIR = ".curated"
DOWNLOADS_DIR = ".downloads"  # under the output dir, unless --download-dir says otherwise
LIST_FIELDS = ("input_urls", "crawl")


@dataclass(frozen=True)
class PipelineOptions:
    """What a pipeline builder may use; the submit-script variables map onto these."""

    input_dir: str
    output_dir: str
    input_file_type: str = DEFAULT_FORMAT
    output_file_type: str | None = None
    files_per_partition: int = 1
    text_field: str = defaults.TEXT_FIELD
    malformed: str = defaults.MALFORMED_POLICIES[0]
    input_urls: tuple[str, ...] = ()
    crawl: tuple[str, ...] = ()
    crawl_base_url: str = defaults.COMMON_CRAWL_BASE_URL
    crawl_files: str | None = None
    download_dir: str | None = None
    download_workers_per_node: float = defaults.DOWNLOAD_WORKERS_PER_NODE
    download_retries: int = defaults.DOWNLOAD_RETRIES
    download_timeout: float = defaults.DOWNLOAD_READ_TIMEOUT_S
    max_requests_per_second: float | None = None
    quality_settings: str | None = None
    keep_removed: bool = False
    annotate: bool = False
    records_per_batch: int = defaults.WARC_RECORDS_PER_BATCH
    output_file_size: int = defaults.OUTPUT_FILE_SIZE
    blocklists_dir: str | None = None  # where FineWeb's URL block lists are installed (default: defaults.URL_LISTS_DIR)
    allocator: str = MIMALLOC  # what the helper processes (extraction, tokenizing) allocate with
    # The values of the default pipeline's filter options (``pipelines.filters``), by option.
    filter_options: Mapping[str, Any] = field(default_factory=dict)
    # The values of the web pipelines' step options (``pipelines.steps``: languages, ...), by option.
    step_options: Mapping[str, Any] = field(default_factory=dict)
    phases: PhaseSettings = field(default_factory=PhaseSettings)  # the settings of the phases after this one
    extra: dict[str, str] = field(default_factory=dict)
    # The saved paths lists of ``crawl`` (``run.crawls``), added when the run resolves them.
    crawl_lists: tuple[str, ...] = ()
    select_from: str | None = None
    # The identity of the run ``select_from`` names (``run.selected_run``), added when the run resolves it.
    selected_from: Mapping[str, str] | None = None

    def __getattr__(self, name: str) -> Any:
        """A web step option's value by its name (``options.languages``), for a pipeline
        builder of the user's own: the option's default when the run did not give it."""
        option = None if name.startswith("_") else next((o for o in web.step_options() if o.name == name), None)
        if option is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return self.step_options.get(name, option.default)

    @property
    def written_dir(self) -> str:
        """Where the curation phase writes: the output dir, or, when a later phase writes the
        run's output (dedup's removal), a hidden staging dir inside it."""
        return joined(self.output_dir, CURATED_DIR) if self.phases.output_staged else self.output_dir

    def stores(self) -> tuple[str, ...]:
        """The input and output locations, some of which may be in an object store."""
        return tuple(location for location in (self.input_dir, self.output_dir) if location)

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """The default of every run option these options hold as a field, by option name."""
        return {item.name: item.default if item.default is not MISSING else None
                for item in fields(cls) if item.default_factory is MISSING}

    @classmethod
    def of(cls, input_dir: str | Path, output_dir: str | Path, **values: Any) -> PipelineOptions:
        """The options of a run given ``values`` by run option (``min_words=5``,
        ``drop_empty=True``), for a pipeline built in a notebook or a test (the later phases'
        settings come from the phase registry: ``run.request.RunRequest``)."""
        return cls.from_values({"input_dir": str(input_dir), "output_dir": str(output_dir), **values})

    @classmethod
    def from_values(cls, values: Mapping[str, Any], phases: PhaseSettings | None = None) -> PipelineOptions:
        """The options named by run-option values, with the later phases' ``phases`` (the
        phase registry builds them from the same values); names these options do not hold
        are left out."""
        own = {item.name: values[item.name] for item in fields(cls)
               if item.name in values and item.name not in ("filter_options", "step_options", "phases")}
        own["input_dir"] = own.get("input_dir") or ""
        own.update({name: tuple(own.get(name) or ()) for name in LIST_FIELDS})
        filter_options = {option.name: values[option.name] for option in FILTERS.options() if option.name in values}
        steps = {option.name: tuple(values[option.name]) if isinstance(values[option.name], list) else values[option.name]
                 for option in web.step_options() if option.name in values}
        return cls(**own, filter_options=filter_options, step_options=steps, phases=phases or PhaseSettings())

    def selecting(self, output_dir: str, output_format: str, identity: Mapping[str, str]) -> PipelineOptions:
        """These options reading the output (``output_dir``, in ``output_format``) of the run
        whose identity is ``identity``, which the pipeline's fingerprint then pins."""
        return replace(self, input_dir=output_dir, input_file_type=output_format, selected_from=dict(identity))

    @property
    def url_lists(self) -> tuple[str, ...]:
        """Every URL list the run downloads from: ``--input-urls`` and the crawls' saved lists."""
        return (*self.input_urls, *self.crawl_lists)

    def default_stages(self) -> list:
        """The default pipeline: the source, the download when the inputs are URLs, the reader,
        the filters these options switch on, the writer."""
        return [self.source(), *self.downloads(), self.reader(), *self.filters(), self.writer()]

    def source(self):
        from ..stages.partition import FilePartitioningStage
        from ..stages.urls import UrlListStage

        if self.url_lists:
            return UrlListStage(self.url_lists, self.files_per_partition, self.crawl_base_url, self.crawl_files)
        if is_s3(self.input_dir):
            from ..stages.objects import ObjectPartitioningStage

            return ObjectPartitioningStage(self.input_dir, self.input_file_type, self.files_per_partition)
        return FilePartitioningStage(self.input_dir, self.input_file_type, self.files_per_partition)

    def downloads(self) -> list:
        """The download stage when the inputs are URLs (downloaded files then go to the reader);
        an object prefix's objects are read by the reader itself."""
        from ..stages.download import DownloadStage

        if not self.url_lists:
            return []
        if not self.download_dir and is_s3(self.output_dir):
            raise ConfigError(f"the output dir {self.output_dir} is in an object store: give download_dir, a path "
                              "where the downloaded inputs are kept (a run uses CHECKPOINT_PATH/.downloads)")
        directory = self.download_dir or str(Path(self.output_dir) / DOWNLOADS_DIR)
        return [
            DownloadStage(
                directory, workers_per_node=self.download_workers_per_node, retries=self.download_retries,
                read_timeout_s=self.download_timeout, max_requests_per_second=self.max_requests_per_second,
            )
        ]

    def filters(self) -> list:
        """The default pipeline's filters that ``filter_options`` switch on."""
        return FILTERS.build(self.filter_options, self.text_field)

    def reader(self):
        from ..formats import reader_for

        return reader_for(self.input_file_type, self.malformed, self.records_per_batch)

    def writer(self):
        from ..formats import writer_for

        return writer_for(self.output_file_type or DEFAULT_FORMAT, self.written_dir)
