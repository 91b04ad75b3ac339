"""What a pipeline is built from: the run's options (paths, formats, filter switches).

A plain value with no heavy imports, so a run can parse its options and launch its Ray
head before it imports pyarrow, Ray Data or the stages; each method imports the stage it
builds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..core.phases import DedupSettings
from ..formats import DEFAULT_FORMAT
from ..stages import defaults

# Pipelines addressed by name (``--pipeline commoncrawl``) as well as by module:function.
BUILT_IN_PIPELINES = {"commoncrawl": "curator_array.pipelines.commoncrawl:build"}
# Where the curation phase writes when dedup phases follow (hidden, like the other dot-dirs).
CURATED_DIR = ".curated"


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
    min_language_score: float = 0.0
    extractor: str = defaults.EXTRACTORS[0]
    quality_settings: str | None = None
    records_per_batch: int = defaults.WARC_RECORDS_PER_BATCH
    dedup: str | None = None
    dedup_buckets: int | None = None
    dedup_ngram: int = 5
    dedup_bands: int = 14
    dedup_rows: int = 8
    dedup_seed: int = 1
    dedup_verify: bool = False
    dedup_threshold: float = 0.75
    dedup_against: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)
    # The saved paths lists of ``crawl`` (``run.crawls``), added when the run resolves them.
    crawl_lists: tuple[str, ...] = ()

    @property
    def written_dir(self) -> str:
        """Where the curation phase writes: the output dir, or, when a dedup phase removes
        copies afterwards, a hidden staging dir inside it (the removal phase fills the output)."""
        return str(Path(self.output_dir) / CURATED_DIR) if self.dedup else self.output_dir

    def dedup_settings(self) -> DedupSettings | None:
        """The run's dedup phases, or None without ``--dedup``."""
        if not self.dedup:
            return None
        return DedupSettings(self.dedup, self.dedup_ngram, self.dedup_bands, self.dedup_rows, self.dedup_seed,
                             self.dedup_buckets, self.dedup_verify, self.dedup_threshold,
                             tuple(str(Path(p).resolve()) for p in self.dedup_against))

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
