"""The option table: every option of ``curator-array run``, defined once.

Each ``RunOption`` names a field of the run request (``RunRequest``) or of the pipeline
options (``PipelineOptions``, whose ``dedup_*`` options set the fields of its dedup
settings); the field's default is the option's default. The table adds the flag, the
variable, bounds or choices and the help text. From it come the click options of ``run``,
the variables job scripts forward into containers, what ``submit`` reads from the
environment, and the option table of docs/options.md.

The variable of an option is its flag in capitals with ``_`` for ``-`` (``--min-words`` →
``MIN_WORDS``); options about how a run executes rather than what it computes (this
start, Ray, several nodes) take the ``CURATOR_ARRAY_`` prefix (``--num-cpus`` →
``CURATOR_ARRAY_NUM_CPUS``). A few keep the names they had before the rule:
``LEGACY_VARIABLES``.

How a value is chosen for each option is ``precedence``'. ``run`` options are pinned by
``submit`` for the elements it queues; ``start`` options belong to one start and are
never pinned.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any

from ..core.formats import DEFAULT_FORMAT, input_formats, output_formats
from ..dedup.settings import MODES as DEDUP_MODES
from ..pipelines.options import BUILT_IN_PIPELINES, PipelineOptions
from ..slurm.jobenv import parse_bool
from ..slurm.sites import ScriptFacts
from ..stages import defaults
from ..tokens.settings import FORMATS as TOKEN_FORMATS
from ..tokens.tokenizer import fetch_tokenizer
from .request import RunRequest

KINDS = ("text", "path", "file", "files", "file-or-name", "existing-paths", "int", "size", "float", "flag", "switch",
         "choice", "list")
# Units a size may be given in: 10G is 10**10 bytes, 10GiB 10 * 2**30.
SIZE_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
              "TIB": 2**40}
SCOPES = ("run", "start")
EXECUTION_GROUPS = ("start", "ray", "nodes")
PREFIX = "CURATOR_ARRAY_"
LEGACY_VARIABLES = {
    "pipeline_ref": "CURATOR_PIPELINE",
    "malformed": "MALFORMED_RECORDS",
    "extractor": "HTML_EXTRACTOR",
    "ray_address": "RAY_ADDRESS",
    "ray_temp_dir": "CURATOR_ARRAY_RAY_TMPDIR",
}

# Job scripts export the names their site's [env] set here, so an element can tell them apart.
SITE_ENV_VARIABLE = "CURATOR_ARRAY_SITE_ENV"


@dataclass(frozen=True)
class RunOption:
    """One option. ``kind`` says how a value is read (see ``KINDS``).

    ``flag`` is an on/off flag, ``switch`` a ``--name/--no-name`` pair whose unset value
    means "decide for me", ``list`` a comma-separated list, ``existing-paths`` one or more
    paths that must exist (the flag may be repeated; the variable separates them with
    ``os.pathsep``), ``file`` a file that must exist, copied into the checkpoint when a run
    is submitted (so every element reads it, whatever its container mounts); ``files`` one or
    more such files (repeatable, like ``existing-paths``); ``file-or-name``
    likewise, or a name ``submit`` fetches on the login node (a tokenizer on the Hugging Face
    Hub); ``size`` a number of bytes, with an optional unit (``10G``, ``512MiB``).
    """

    name: str
    help: str
    kind: str = "text"
    group: str = "input"
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    minimum_open: bool = False
    metavar: str | None = None
    required: bool = False
    default_text: str | None = None  # shown in --help instead of the default value
    hint: str | None = None  # added to the message about a value that is not a choice
    fetch: Callable[[str], bytes] | None = None  # file-or-name: the file's content of a name

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name}: unknown kind {self.kind!r}")

    @property
    def flag(self) -> str:
        return "--" + ("pipeline" if self.name == "pipeline_ref" else self.name.replace("_", "-"))

    @property
    def variable(self) -> str:
        if self.name in LEGACY_VARIABLES:
            return LEGACY_VARIABLES[self.name]
        plain = self.flag[2:].replace("-", "_").upper()
        return PREFIX + plain if self.group in EXECUTION_GROUPS else plain

    @property
    def scope(self) -> str:
        return "start" if self.group == "start" else "run"

    @property
    def default(self) -> Any:
        return option_default(self.name)

    def parse(self, text: str) -> Any:
        """The value of ``text`` as this option reads it; ValueError says what is wrong."""
        raw = text.strip()
        if self.kind in ("flag", "switch"):
            return parse_bool(raw)
        if self.kind == "size":
            found = re.fullmatch(r"(\d+)\s*([A-Z]*)", raw.upper())
            unit = found.group(2) if found else None
            if unit is not None and unit not in SIZE_UNITS and unit.endswith("B"):
                unit = unit[:-1]
            if unit not in SIZE_UNITS:
                raise ValueError("not a size (bytes, or a number with K, M, G, T, KiB, MiB, GiB, TiB)")
            return self._bounded(int(found.group(1)) * SIZE_UNITS[unit])
        if self.kind == "int":
            try:
                return self._bounded(int(raw))
            except ValueError as exc:
                raise ValueError(str(exc) if "must be" in str(exc) else "not an integer") from None
        if self.kind == "float":
            try:
                return self._bounded(float(raw))
            except ValueError as exc:
                raise ValueError(str(exc) if "must be" in str(exc) else "not a number") from None
        if self.kind == "choice":
            if raw not in self.choices:
                raise ValueError(f"not one of {', '.join(self.choices)}" + (f" ({self.hint})" if self.hint else ""))
            return raw
        if self.kind == "list":
            return tuple(item.strip() for item in raw.split(",") if item.strip())
        if self.kind in ("existing-paths", "files"):
            paths = tuple(p for p in text.split(os.pathsep) if p)
            missing = [p for p in paths if not os.path.exists(p)]
            if missing:
                raise ValueError(f"{missing[0]} does not exist")
            if self.kind == "files" and not all(map(os.path.isfile, paths)):
                raise ValueError(f"{next(p for p in paths if not os.path.isfile(p))} is not a file")
            return paths
        if not raw:
            raise ValueError("empty")
        if self.kind == "file" and not os.path.isfile(text):
            raise ValueError(f"{text} is not a file")
        if self.kind == "file-or-name" and not os.path.isfile(text) and (
                os.path.exists(text) or text.startswith(("/", ".", "~")) or text.endswith(".json")):
            raise ValueError(f"{text} is not a file")
        return text

    def _bounded(self, value: float) -> float:
        low, high = self.minimum, self.maximum
        if low is not None and (value <= low if self.minimum_open else value < low):
            raise ValueError(f"must be {'above' if self.minimum_open else 'at least'} {low:g}")
        if high is not None and value > high:
            raise ValueError(f"must be at most {high:g}")
        return value

    def show(self, value: Any) -> str:
        """The value as a user would write it in the variable."""
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, (tuple, list)):
            return (os.pathsep if self.kind in ("existing-paths", "files") else ",").join(str(v) for v in value)
        return "" if value is None else str(value)


def option_default(name: str) -> Any:
    """The default of a request or pipeline field: the one place each default is written."""
    pipeline = PipelineOptions.option_defaults()
    if name in pipeline:
        return pipeline[name]
    for item in fields(RunRequest):
        if item.name == name:
            return item.default if item.default is not MISSING else None
    raise KeyError(name)


RUN_OPTIONS: tuple[RunOption, ...] = (
    # what to read and where to write
    RunOption("input_dir", "Input directory; not needed with --input-urls.", "path"),
    RunOption("output_dir", "Output directory.", "path", required=True),
    RunOption("checkpoint_path", "Checkpoint directory of the logical run (default: the output dir).", "path"),
    RunOption("input_urls", "URL list(s) to download first: one URL per line or JSONL with a 'url' field "
              "(optional 'sha256', 'size'); a file or a directory, repeatable. INPUT_DIR is then ignored.",
              "existing-paths"),
    RunOption("crawl", "Common Crawl snapshots to download, e.g. CC-MAIN-2024-10 (their warc.paths.gz, saved with "
              "the run on its first start).", "list"),
    RunOption("crawl_base_url", "Where crawl-data/ is served: the public archive, a mirror or a site-local copy; "
              "also the base of a warc.paths(.gz) file given to --input-urls."),
    RunOption("crawl_files", "Only this slice START:STOP of each paths list, e.g. 0:1000.", metavar="START:STOP"),
    RunOption("input_file_type", "Format of the input files.", "choice", choices=tuple(input_formats())),
    RunOption("output_file_type", "Format of the output files.", "choice", choices=tuple(output_formats()),
              default_text=f"{DEFAULT_FORMAT}; parquet for --pipeline commoncrawl"),
    RunOption("files_per_partition", "Input files per source task.", "int", minimum=1),
    RunOption("pipeline_ref", "A built-in pipeline (commoncrawl: WARC → text → language → quality → Parquet) "
              "or a function building the stage list (default: read, filters, write).",
              metavar="|".join([*sorted(BUILT_IN_PIPELINES), "MODULE:FUNCTION"])),
    # filters
    RunOption("text_field", "Field the filters look at.", group="filters"),
    RunOption("drop_empty", "Drop documents with empty or missing text.", "flag", "filters"),
    RunOption("min_words", "Drop documents with fewer words.", "int", "filters", minimum=0),
    RunOption("max_words", "Drop documents with more words.", "int", "filters", minimum=0),
    RunOption("dedup_within_task", "Drop exact duplicate texts within each source task (no dedup phases).", "flag",
              "filters"),
    RunOption("malformed", "Malformed JSONL lines: fail the task, or skip and count them.", "choice", "filters",
              choices=defaults.MALFORMED_POLICIES),
    # downloads
    RunOption("download_dir", "Where downloads go (shared or node-local; default OUTPUT_DIR/.downloads).", "path",
              "downloads"),
    RunOption("download_workers_per_node", "Concurrent downloads per node (pool = this x alive nodes).", "float",
              "downloads", minimum=0, minimum_open=True),
    RunOption("download_retries", "Further attempts per URL after the first.", "int", "downloads", minimum=0),
    RunOption("download_timeout", "Seconds without data before a download attempt is abandoned.", "float",
              "downloads", minimum=0.1),
    RunOption("max_requests_per_second", "Download requests per second per node, at most (default: no limit). When "
              "the server throttles one download (503, 429), the node's other downloads wait too.", "float",
              "downloads", minimum=0, minimum_open=True),
    # web text (--pipeline commoncrawl)
    RunOption("languages", "commoncrawl, fineweb: keep documents in these languages, e.g. en,de,ja.", "list",
              "web", default_text="all for commoncrawl, en for fineweb"),
    RunOption("min_language_score", "commoncrawl, fineweb: drop documents whose language score is lower.", "float",
              "web", minimum=0, maximum=1, default_text="0 for commoncrawl, 0.65 for fineweb"),
    RunOption("language_model", "fineweb: a fastText language-ID model file (lid.176.bin, GlotLID) instead of the "
              "bundled lid.176.ftz; checked, and copied into the checkpoint, at submit.", "file", "web"),
    RunOption("extractor", "commoncrawl: HTML → main text extractor (fineweb: trafilatura with FineWeb's settings).",
              "choice", "web", choices=defaults.EXTRACTORS),
    RunOption("extract_timeout", "Seconds a page may take to extract, in a child process that a page which hangs or "
              "crashes the extractor cannot stall or kill; such pages are dropped and counted.", "float", "web",
              minimum=0, minimum_open=True, default_text="1 for fineweb; none (in process) for commoncrawl"),
    RunOption("quality_settings", "commoncrawl, fineweb: a TOML file of quality-filter settings per language, on "
              "top of the built-in table (docs/filters.md).", "file", "web"),
    RunOption("url_blocklist", "fineweb: a site's own block list on top of FineWeb's, one domain or URL a line; "
              "repeatable; copied into the checkpoint at submit.", "files", "web"),
    RunOption("keep_removed", "Write every document a filter dropped, with the rule that dropped it, under "
              "OUTPUT_DIR/.removed/<step>/.", "flag", "filters"),
    RunOption("records_per_batch", "WARC input: records per part (a reader's memory grows with this, not the file).",
              "int", "web", minimum=1),
    # dedup phases after the curation phase (docs/dedup.md)
    RunOption("dedup", "Remove duplicates across the whole run, as phases after curation: exact (same normalised "
              "text) or fuzzy (MinHash + LSH near-duplicates too). The output dir then holds the kept documents.",
              "choice", "dedup", choices=DEDUP_MODES, hint="the per-task exact dedup is --dedup-within-task"),
    RunOption("dedup_buckets", "Bucket elements of the dedup phases (each holds 1/N of the band keys).", "int", "dedup",
              minimum=1, default_text="--total-shards"),
    RunOption("dedup_components_elements", "Elements that find the clusters of duplicate pairs together, in rounds "
              "(each holds 1/N of the pairs); 1: one element holds them all.", "int", "dedup", minimum=1),
    RunOption("dedup_ngram", "fuzzy: words per shingle.", "int", "dedup", minimum=1),
    RunOption("dedup_bands", "fuzzy: LSH bands.", "int", "dedup", minimum=1),
    RunOption("dedup_rows", "fuzzy: hashes per band.", "int", "dedup", minimum=1),
    RunOption("dedup_seed", "fuzzy: seed of the hash functions.", "int", "dedup", minimum=0),
    RunOption("dedup_verify", "Confirm each candidate pair before removal: fuzzy by its true Jaccard similarity, "
              "exact by comparing the normalised texts.", "flag", "dedup"),
    RunOption("dedup_threshold", "fuzzy with --dedup-verify: the Jaccard similarity a pair needs.", "float", "dedup",
              minimum=0, maximum=1),
    RunOption("dedup_against", "Checkpoint(s) of earlier runs with the same dedup settings: also remove copies of "
              "their documents (from their saved signatures).", "existing-paths", "dedup"),
    RunOption("dedup_keep_removed", "Write every removed document (all its fields, with the identity and id of the "
              "copy kept) under OUTPUT_DIR/.removed/dedup/.", "flag", "dedup"),
    RunOption("dedup_language", "fuzzy: the language of documents without a `language` field; words are split as "
              "the quality filters split that language (SudachiPy for ja, jieba for zh).", group="dedup",
              metavar="CODE"),
    # training-ready output: token files (docs/tokens.md)
    RunOption("tokenize", "Tokenize the output for training, as phases after the last one: a tokenizer.json file, "
              "or a tokenizer's name on the Hugging Face Hub (fetched by submit on the login node). Documents also "
              "get a token_count.", "file-or-name", "tokenize", metavar="TOKENIZER", fetch=fetch_tokenizer),
    RunOption("eos_token", "The token appended to each document (default: the tokenizer's own end-of-text token).",
              group="tokenize"),
    RunOption("token_format", "Token files: Megatron's indexed dataset (.bin/.idx) or datatrove's (.ds).", "choice",
              "tokenize", choices=TOKEN_FORMATS),
    RunOption("token_file_size", "The largest merged token file under OUTPUT_DIR/tokens/, in bytes of tokens "
              "(units: K, M, G, T, KiB, ...).", "size", "tokenize", minimum=1, default_text="10G"),
    # this start only
    RunOption("phase", "Run only this element of the phase named (what submit passes to the elements of the "
              "phases after the first; `status` names them); default: its shard of the first phase, "
              "then, outside an array, every later phase whose inputs are complete.", group="start",
              metavar="PHASE"),
    RunOption("request", "Run the request `submit` pinned in the checkpoint under this id (what its job scripts "
              "pass): every run option then comes from there.", group="start", metavar="ID"),
    RunOption("force", "Rerun a shard even if its manifest exists.", "flag", "start"),
    RunOption("relist", "Walk the input tree anyway and refuse any difference from the run's frozen listing "
              "(elements otherwise read the frozen listing and check only their own files).", "flag", "start"),
    RunOption("new_run", "If the checkpoint holds a run with another pipeline, shard range or input listing, "
              "archive its records and start a new logical run (outside arrays; arrays use `submit --new-run`).",
              "flag", "start"),
    RunOption("cluster", "local: a private Ray head on this node; slurm: one Ray cluster over the job's nodes "
              "(every node runs this command; node 0 drives). The entrypoint chooses.", "choice", "start",
              choices=("local", "slurm")),
    RunOption("node_ip", "Address other nodes reach this one at (default: the default route's interface).",
              group="start"),
    RunOption("ray_address", "Use this running Ray cluster instead of starting one (never stopped).", group="start"),
    # Ray
    RunOption("num_cpus", "CPUs for the private Ray node (default: the job's CPUs on the node).", "int", "ray",
              minimum=1),
    RunOption("object_store_memory", "Object store bytes (default: from the job's memory and /dev/shm).", "int",
              "ray", minimum=1),
    RunOption("ray_temp_dir", "Parent of Ray's session dir (default: TMPDIR); keep it short.", "path", "ray"),
    RunOption("stall_timeout", "Fail when no operator progresses for this many seconds.", "float", "ray", minimum=1),
    RunOption("progress", "Ray Data's progress bars (default: on a terminal).", "switch", "ray"),
    RunOption("progress_interval", "Seconds between progress lines in the log (tasks, rows/s, MB/s, ETA); 0: none.",
              "float", "ray", minimum=0),
    RunOption("profile", "Write a cProfile of every worker process under the checkpoint "
              "(.profiles/shard_<S>/<attempt>/; read with python -m pstats).", "flag", "ray"),
    # several nodes per element
    RunOption("rendezvous_dir", "Shared directory where the nodes of a multi-node job meet (default: under the "
              "checkpoint's metadata dir).", "path", "nodes"),
    RunOption("worker_join_timeout", "Seconds the head waits for every node.", "float", "nodes", minimum=1),
)

OPTIONS_BY_NAME = {option.name: option for option in RUN_OPTIONS}
OPTION_VARIABLES = tuple(option.variable for option in RUN_OPTIONS)


def job_script_facts() -> ScriptFacts:
    """What the rendered job scripts say about the run: formats, and the variables they forward."""
    return ScriptFacts(tuple(input_formats()), tuple(output_formats()), OPTION_VARIABLES)


def markdown_rows() -> list[str]:
    """The option table of docs/options.md, one row per option (a test keeps the doc equal to it)."""
    rows = ["| flag | variable | default | what |", "|---|---|---|---|"]
    for option in RUN_OPTIONS:
        value = option.default
        default = option.default_text or ("" if value is None or value is False or value == () else option.show(value))
        rows.append(f"| `{option.flag}` | `{option.variable}` | {default} | {option.help.replace('|', '/')} |")
    return rows
