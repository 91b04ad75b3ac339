"""Every option of ``curator-array run``, defined once.

Each ``RunOption`` names a field of the run request (``RunRequest``) or of the pipeline
options (``PipelineOptions``); the field's default is the option's default. The table
adds what the field cannot say: the flag, the environment variable, bounds or choices,
and the help text. The CLI builds its click options from it, ``submit`` reads the same
variables, and the job templates forward them. Pure data: no click, no pyarrow.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any

from ..formats import DEFAULT_FORMAT, input_formats, output_formats
from ..pipelines.options import BUILT_IN_PIPELINES, PipelineOptions
from ..slurm.sites import ScriptFacts
from ..stages import defaults
from .request import RunRequest

KINDS = ("text", "path", "existing-path", "int", "float", "flag", "switch", "choice", "list")


@dataclass(frozen=True)
class RunOption:
    """One option: ``kind`` says how its value is read (see ``KINDS``).

    ``flag`` is an on/off flag, ``switch`` a ``--name/--no-name`` pair whose unset value
    means "decide for me", ``list`` a comma-separated list, ``existing-path`` one or more
    paths that must exist (the option may be repeated).
    """

    name: str
    help: str
    kind: str = "text"
    variable: str | None = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    minimum_open: bool = False
    metavar: str | None = None
    required: bool = False
    default_text: str | None = None  # shown in --help instead of the default value

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name}: unknown kind {self.kind!r}")

    @property
    def flag(self) -> str:
        return "--" + ("pipeline" if self.name == "pipeline_ref" else self.name.replace("_", "-"))

    @property
    def default(self) -> Any:
        return option_default(self.name)


def option_default(name: str) -> Any:
    """The default of a request or pipeline field: the one place each default is written."""
    for owner in (PipelineOptions, RunRequest):
        for item in fields(owner):
            if item.name == name:
                if item.default is not MISSING:
                    return item.default
                if item.default_factory is not MISSING:
                    return item.default_factory()
                return None
    raise KeyError(name)


RUN_OPTIONS: tuple[RunOption, ...] = (
    # what to read and where to write
    RunOption("input_dir", "Input directory; not needed with --input-urls.", "path", "INPUT_DIR"),
    RunOption("output_dir", "Output directory.", "path", "OUTPUT_DIR", required=True),
    RunOption("checkpoint_path", "Checkpoint directory of the logical run (default: the output dir).", "path",
              "CHECKPOINT_PATH"),
    RunOption("input_urls", "URL list(s) to download first: one URL per line or JSONL with a 'url' field "
              "(optional 'sha256', 'size'); a file or a directory, repeatable. INPUT_DIR is then ignored.",
              "existing-path", "INPUT_URLS"),
    RunOption("input_file_type", "Format of the input files.", "choice", "INPUT_FILE_TYPE",
              choices=tuple(input_formats())),
    RunOption("output_file_type", "Format of the output files.", "choice", "OUTPUT_FILE_TYPE",
              choices=tuple(output_formats()), default_text=f"{DEFAULT_FORMAT}; parquet for --pipeline commoncrawl"),
    RunOption("files_per_partition", "Input files per source task.", "int", "FILES_PER_PARTITION", minimum=1),
    RunOption("pipeline_ref", "A built-in pipeline (commoncrawl: WARC → text → language → quality → Parquet) "
              "or a function building the stage list (default: read, filters, write).", "text", "CURATOR_PIPELINE",
              metavar="|".join([*sorted(BUILT_IN_PIPELINES), "MODULE:FUNCTION"])),
    # filters
    RunOption("text_field", "Field the filters look at.", "text"),
    RunOption("drop_empty", "Drop documents with empty or missing text.", "flag"),
    RunOption("min_words", "Drop documents with fewer words.", "int", minimum=0),
    RunOption("max_words", "Drop documents with more words.", "int", minimum=0),
    RunOption("dedup", "Drop exact duplicate texts within each source task.", "flag"),
    RunOption("malformed", "Malformed JSONL lines: fail the task, or skip and count them.", "choice",
              "MALFORMED_RECORDS", choices=defaults.MALFORMED_POLICIES),
    # downloads
    RunOption("download_dir", "Where downloads go (shared or node-local; default OUTPUT_DIR/.downloads).", "path",
              "DOWNLOAD_DIR"),
    RunOption("download_workers_per_node", "Concurrent downloads per node (pool = this x alive nodes).", "float",
              "DOWNLOAD_WORKERS_PER_NODE", minimum=0, minimum_open=True),
    RunOption("download_retries", "Further attempts per URL after the first.", "int", minimum=0),
    RunOption("download_timeout", "Seconds without data before a download attempt is abandoned.", "float",
              minimum=0.1),
    # web text (--pipeline commoncrawl)
    RunOption("languages", "commoncrawl: keep documents in these languages, e.g. en,de,ja (default: all).", "list",
              "LANGUAGES"),
    RunOption("min_language_score", "commoncrawl: drop documents whose language score is lower.", "float",
              "MIN_LANGUAGE_SCORE", minimum=0, maximum=1),
    RunOption("extractor", "commoncrawl: HTML → main text extractor.", "choice", "HTML_EXTRACTOR",
              choices=defaults.EXTRACTORS),
    RunOption("records_per_batch", "WARC input: records per part (a reader's memory grows with this, not the file).",
              "int", minimum=1),
    # this start
    RunOption("force", "Rerun a shard even if its manifest exists.", "flag"),
    RunOption("relist", "Walk the input tree anyway and refuse any difference from the run's frozen listing "
              "(elements otherwise read the frozen listing and check only their own files).", "flag"),
    RunOption("new_run", "If the checkpoint holds a run with another pipeline, shard range or input listing, "
              "archive its records and start a new logical run (outside arrays; arrays use `submit --new-run`).",
              "flag"),
    # Ray
    RunOption("ray_address", "Use this running Ray cluster instead of starting one (never stopped).", "text",
              "RAY_ADDRESS"),
    RunOption("num_cpus", "CPUs for the private Ray node (default: the job's CPUs on the node).", "int", minimum=1),
    RunOption("object_store_memory", "Object store bytes (default: from the job's memory and /dev/shm).", "int",
              minimum=1),
    RunOption("ray_temp_dir", "Parent of Ray's session dir (default: TMPDIR); keep it short.", "path",
              "CURATOR_ARRAY_RAY_TMPDIR"),
    RunOption("stall_timeout", "Fail when no operator progresses for this many seconds.", "float",
              "CURATOR_ARRAY_STALL_TIMEOUT", minimum=1),
    RunOption("progress", "Ray Data's progress bars (default: on a terminal).", "switch"),
    RunOption("progress_interval", "Seconds between progress lines in the log (tasks, rows/s, MB/s, ETA); 0: none.",
              "float", "CURATOR_ARRAY_PROGRESS_INTERVAL", minimum=0),
    # several nodes per element
    RunOption("cluster", "local: a private Ray head on this node; slurm: one Ray cluster over the job's nodes "
              "(every node runs this command; node 0 drives). The entrypoint chooses.", "choice",
              choices=("local", "slurm")),
    RunOption("rendezvous_dir", "Shared directory where the nodes of a multi-node job meet (default: under the "
              "checkpoint's metadata dir).", "path", "CURATOR_ARRAY_RENDEZVOUS_DIR"),
    RunOption("worker_join_timeout", "Seconds the head waits for every node.", "float",
              "CURATOR_ARRAY_WORKER_JOIN_TIMEOUT", minimum=1),
    RunOption("node_ip", "Address other nodes reach this one at (default: the default route's interface).", "text",
              "CURATOR_ARRAY_NODE_IP"),
)

OPTIONS_BY_NAME = {option.name: option for option in RUN_OPTIONS}


def job_script_facts() -> ScriptFacts:
    """What the rendered job scripts say about the run: formats, and the variables they forward."""
    return ScriptFacts(tuple(input_formats()), tuple(output_formats()))
