"""The pipeline options: the values a pipeline builder is given (paths, formats, filter
switches, the dedup settings), typed.

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

from ..core.formats import DEFAULT_FORMAT
from ..dedup.settings import DedupSettings
from ..stages import defaults
from ..tokens.settings import TokenizeSettings
from .phase_settings import PhaseSettings

# Pipelines addressed by name (``--pipeline commoncrawl``) as well as by module:function.
BUILT_IN_PIPELINES = {"commoncrawl": "curator_array.pipelines.commoncrawl:build",
                      "fineweb": "curator_array.pipelines.fineweb:build"}
# Where the curation phase writes when dedup phases follow (hidden, like the other dot-dirs).
CURATED_DIR = ".curated"
# Run options named ``dedup_<field>`` set the fields of ``dedup`` (``--dedup`` its mode).
DEDUP_PREFIX = "dedup_"
LIST_FIELDS = ("input_urls", "crawl", "languages", "url_blocklist")


@dataclass(frozen=True)
class PipelineOptions:
    """What a pipeline builder may use; the submit-script variables map onto these."""

    input_dir: str
    output_dir: str
    input_file_type: str = DEFAULT_FORMAT
    output_file_type: str | None = None
    files_per_partition: int = 1
    text_field: str = defaults.TEXT_FIELD
    drop_empty: bool = False
    min_words: int | None = None
    max_words: int | None = None
    dedup_within_task: bool = False
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
    languages: tuple[str, ...] = ()
    min_language_score: float | None = None  # the pipeline's own: 0 for commoncrawl, 0.65 for fineweb
    language_model: str | None = None
    extractor: str = defaults.EXTRACTORS[0]
    extract_timeout: float | None = None  # the pipeline's own: none for commoncrawl, 1 s for fineweb
    quality_settings: str | None = None
    url_blocklist: tuple[str, ...] = ()
    keep_removed: bool = False
    records_per_batch: int = defaults.WARC_RECORDS_PER_BATCH
    dedup: DedupSettings | None = None
    tokenize: TokenizeSettings | None = None
    extra: dict[str, str] = field(default_factory=dict)
    # The saved paths lists of ``crawl`` (``run.crawls``), added when the run resolves them.
    crawl_lists: tuple[str, ...] = ()

    @property
    def written_dir(self) -> str:
        """Where the curation phase writes: the output dir, or, when a dedup phase removes
        copies afterwards, a hidden staging dir inside it (the removal phase fills the output)."""
        return str(Path(self.output_dir) / CURATED_DIR) if self.dedup else self.output_dir

    @property
    def phase_settings(self) -> PhaseSettings:
        return PhaseSettings(self.dedup, self.tokenize)

    @classmethod
    def option_defaults(cls) -> dict[str, Any]:
        """The default of every run option these options hold, by option name."""
        defaults_ = {item.name: item.default if item.default is not MISSING else None
                     for item in fields(cls) if item.default_factory is MISSING}
        return {**defaults_, **DedupSettings.option_defaults(DEDUP_PREFIX), **TokenizeSettings.option_defaults()}

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> PipelineOptions:
        """The options named by run-option values (``dedup_bands`` → ``dedup.minhash.bands``);
        names these options do not hold are left out."""
        own = {item.name: values[item.name] for item in fields(cls)
               if item.name in values and item.name not in ("dedup", "tokenize")}
        own["input_dir"] = own.get("input_dir") or ""
        own.update({name: tuple(own.get(name) or ()) for name in LIST_FIELDS})
        dedup = DedupSettings.from_options(DEDUP_PREFIX, values)
        if dedup is not None:
            dedup = replace(dedup, against=tuple(str(Path(p).resolve()) for p in dedup.against))
        return cls(**own, dedup=dedup, tokenize=TokenizeSettings.from_options(values))

    @property
    def url_lists(self) -> tuple[str, ...]:
        """Every URL list the run downloads from: ``--input-urls`` and the crawls' saved lists."""
        return (*self.input_urls, *self.crawl_lists)

    def source(self):
        from ..stages.partition import FilePartitioningStage
        from ..stages.urls import UrlListStage

        if self.url_lists:
            return UrlListStage(self.url_lists, self.files_per_partition, self.crawl_base_url, self.crawl_files)
        return FilePartitioningStage(self.input_dir, self.input_file_type, self.files_per_partition)

    def downloads(self) -> list:
        """The download stage when the inputs are URLs (downloaded files then go to the reader)."""
        from ..stages.download import DownloadStage

        if not self.url_lists:
            return []
        directory = self.download_dir or str(Path(self.output_dir) / ".downloads")
        return [
            DownloadStage(
                directory, workers_per_node=self.download_workers_per_node, retries=self.download_retries,
                read_timeout_s=self.download_timeout, max_requests_per_second=self.max_requests_per_second,
            )
        ]

    def filters(self) -> list:
        from ..stages.filters import ExactDuplicateFilter, NonEmptyTextFilter, WordCountFilter

        stages: list = []
        if self.drop_empty:
            stages.append(NonEmptyTextFilter(self.text_field))
        if self.min_words is not None or self.max_words is not None:
            stages.append(WordCountFilter(self.min_words, self.max_words, self.text_field))
        if self.dedup_within_task:
            stages.append(ExactDuplicateFilter(self.text_field))
        return stages

    def reader(self):
        from ..formats import reader_for

        return reader_for(self.input_file_type, self.malformed)

    def writer(self):
        from ..formats import writer_for

        return writer_for(self.output_file_type or DEFAULT_FORMAT, self.written_dir)

    def token_counter(self):
        """What ends the first phase of a run that tokenizes: each document's ``token_count``."""
        from ..stages.token_count import TokenCounter

        settings = self.tokenize
        return TokenCounter(settings.tokenizer, settings.digest, settings.eos_token, self.text_field)
