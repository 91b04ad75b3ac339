"""The option table: every option of ``curator-array run``, gathered from where each is defined.

The run's own options are defined here, once each (``core.options.RunOption``): each names a
field of the run request (``RunRequest``) or of the pipeline options (``PipelineOptions``),
whose default is the option's. The filters of the default pipeline bring theirs
(``pipelines.filters``), the web pipelines' steps theirs (``pipelines.steps``), and so do the
phases (``run.phases``: a phase's options set the fields of its settings). ``run_options()`` gathers them in the order ``--help`` shows them;
from it come the click options of ``run``, the variables job scripts forward into
containers, what ``submit`` reads from the environment, and the option table of
docs/options.md.

How a value is chosen for each option is ``precedence``'. ``run`` options are pinned by
``submit`` for the elements it queues; ``start`` options belong to one start and are
never pinned.
"""

from __future__ import annotations

from dataclasses import MISSING, fields, replace
from typing import Any

from ..core.formats import DEFAULT_FORMAT, input_formats, output_formats
from ..core.options import RunOption
from ..helpers.allocator import ALLOCATORS
from ..pipelines import web
from ..pipelines.filters import FILTERS
from ..pipelines.options import BUILT_IN_PIPELINES, PipelineOptions
from ..slurm.sites import ScriptFacts
from ..stages import defaults
from .phases import PHASES
from .request import CLUSTERS, RunRequest


def field_default(name: str) -> Any:
    """The default of the request or pipeline field ``name``: the one place it is written."""
    pipeline = PipelineOptions.field_defaults()
    if name in pipeline:
        return pipeline[name]
    for item in fields(RunRequest):
        if item.name == name:
            return item.default if item.default is not MISSING else None
    raise KeyError(name)


DEFAULT_PIPELINE = "default"  # read, the filters below, write: what runs without --pipeline
WEB = ("commoncrawl", "fineweb")


def _with_field_defaults(*rows: RunOption) -> tuple[RunOption, ...]:
    return tuple(replace(row, default=field_default(row.name)) for row in rows)


INPUT_OPTIONS = _with_field_defaults(
    RunOption("input_dir", "Input directory; not needed with --input-urls.", "path"),
    RunOption("select_from", "Read the output of this finished run (its output dir, or its checkpoint path): a "
              "selection from an annotated run (--annotate), with --where and the output options. The run must be "
              "complete; its identity is pinned, and a changed run is refused on retry.", "path",
              pipelines=(DEFAULT_PIPELINE,)),
    RunOption("output_dir", "Output directory, or an s3://bucket/prefix.", "path", required=True),
    RunOption("checkpoint_path", "Checkpoint directory of the logical run (default: the output dir; a POSIX path, "
              "needed when the output dir is in an object store).", "path"),
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
              default_text=f"{DEFAULT_FORMAT}; parquet for --pipeline commoncrawl, fineweb and dclm"),
    RunOption("files_per_partition", "Input files per source task.", "int", minimum=1),
    RunOption("output_file_size", "A streamed task's (a WARC's) output files roll over at this size on disk "
              "(units: K, M, G, T, KiB, ...); its parts are row groups of one file up to there.", "size",
              minimum=10**6),
    RunOption("pipeline_ref", "A built-in pipeline, commoncrawl (WARC → Resiliparse text → language → Gopher and "
              "C4 quality → Parquet), fineweb (FineWeb's recipe: Trafilatura, URL filter, lid.176, Gopher, C4, "
              "FineWeb's line rules), dclm (DCLM-Baseline's: RefinedWeb's URL, page and line rules as DCLM wrote "
              "them, lid.176 English; WARC, or JSONL/Parquet with text and url), or MODULE:FUNCTION building the stage list (default: read, filters, write).",
              metavar="|".join([*sorted(BUILT_IN_PIPELINES), "MODULE:FUNCTION"]), flag_name="pipeline",
              old_variables=("CURATOR_PIPELINE",)),
    RunOption("text_field", "Field the filters look at.", group="filters"),
)

AFTER_FILTER_OPTIONS = _with_field_defaults(
    RunOption("malformed", "Malformed JSONL lines: fail the task, or skip and count them.", "choice", "filters",
              choices=defaults.MALFORMED_POLICIES, old_variables=("MALFORMED_RECORDS",)),
    RunOption("keep_removed", "Write every document a filter dropped, with the rule that dropped it, under "
              "OUTPUT_DIR/.removed/pipeline/.", "flag", "filters"),
    RunOption("annotate", "Keep every document a rule would drop, marked: would_drop (the first rule) and "
              "would_drop_all (every rule); scores and measures for all. Select later without recomputing.", "flag",
              "filters"),
    # downloads
    RunOption("download_dir", "Where downloads go (shared or node-local; default OUTPUT_DIR/.downloads, "
              "CHECKPOINT_PATH/.downloads when OUTPUT_DIR is in an object store).", "path",
              "downloads"),
    RunOption("download_workers_per_node", "Concurrent downloads per node (pool = this x alive nodes).", "float",
              "downloads", minimum=0, minimum_open=True),
    RunOption("download_retries", "Further attempts per URL after the first.", "int", "downloads", minimum=0),
    RunOption("download_timeout", "Seconds without data before a download attempt is abandoned.", "float",
              "downloads", minimum=0.1),
    RunOption("max_requests_per_second", "Download requests per second per node, at most (default: no limit). When "
              "the server throttles one download (503, 429), the node's other downloads wait too.", "float",
              "downloads", minimum=0, minimum_open=True),
)

# after the web pipelines' steps' options (``pipelines.steps``)
WEB_OPTIONS = _with_field_defaults(
    RunOption("quality_settings", "commoncrawl, fineweb: a TOML file of quality-filter settings per language, on "
              "top of the built-in table (docs/filters.md).", "file", "web", pipelines=WEB),
    RunOption("records_per_batch", "WARC input: records per part (a reader's memory grows with this, not the file).",
              "int", "web", minimum=1),
)

EXECUTION_OPTIONS = _with_field_defaults(
    # this start only
    RunOption("phase", "Run one element of the phase named, e.g. --phase buckets (`status` lists a run's phases); "
              "the element is the shard index (SLURM_ARRAY_TASK_ID + SHARD_INDEX_OFFSET, or "
              "NEMO_CURATOR_SLURM_ARRAY_SHARD_INDEX), as submit's scripts set it. "
              "Default: this shard of the first phase, then, outside an array, every later phase whose "
              "inputs are complete.", group="start",
              metavar="PHASE"),
    RunOption("request", "Run the request `submit` pinned in the checkpoint under this id (what its job scripts "
              "pass): every run option then comes from there.", group="start", metavar="ID"),
    RunOption("force", "Rerun a shard even if its manifest exists.", "flag", "start"),
    RunOption("relist", "Walk the input tree again: files added since the run froze its listing join the run (a "
              "complete shard that owns new tasks runs again for them only); a removed or changed file is refused. "
              "Outside an array, or `submit -- --relist` (elements read the frozen listing and check their own "
              "files).", "flag", "start"),
    RunOption("new_run", "If the checkpoint holds a run with another pipeline, shard range or input listing, "
              "archive its records and its outputs (all but the download cache) and start a new logical run (outside "
              "arrays; arrays use `submit --new-run`).",
              "flag", "start"),
    RunOption("cluster", "local: a private Ray head on this node; slurm: one Ray cluster over the job's nodes "
              "(every node runs this command; node 0 drives). The entrypoint chooses.", "choice", "start",
              choices=CLUSTERS),
    RunOption("node_ip", "Address other nodes reach this one at (default: the default route's interface).",
              group="start"),
    RunOption("ray_address", "Use this running Ray cluster instead of starting one (never stopped).", group="start",
              variable_name="RAY_ADDRESS"),
    # Ray
    RunOption("num_cpus", "CPUs for the private Ray node, and the worker processes of a phase element that spreads "
              "its work (dedup's signatures) (default: the job's CPUs on the node).", "int", "ray",
              minimum=1),
    RunOption("object_store_memory", "Object store bytes (default: from the job's memory and /dev/shm).", "int",
              "ray", minimum=1),
    RunOption("ray_temp_dir", "Parent of Ray's session dir (default: TMPDIR); keep it short.", "path", "ray",
              variable_name="CURATOR_ARRAY_RAY_TMPDIR"),
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
    # what this host (or image) has installed, and how its helper processes run
    RunOption("blocklists_dir", "fineweb, dclm: where FineWeb's URL block lists are installed (`python -m "
              "curator_array.stages.web.url_lists DIR` installs them there).", "path", "host",
              default_text="the venv's share/curator-array/url-lists", variable_name="CURATOR_ARRAY_URL_LISTS"),
    RunOption("repair", "Repair the tasks that have not finished: accept their mended input files and a new "
              "--malformed policy, record the change in the run (status shows it), keep every finished task. A "
              "finished task's input and the filters still cannot change.", "flag"),
    RunOption("allocator", "The allocator of the helper processes that extract pages and tokenize: mimalloc (a "
              "quarter to a third faster) or the system's.", "choice", "host", choices=ALLOCATORS),
)


def run_options() -> tuple[RunOption, ...]:
    """Every option of ``run``, in the order ``--help`` shows them: the run's own, the
    default pipeline's filters', the phases', then how this start runs."""
    filters = tuple(replace(option, pipelines=(DEFAULT_PIPELINE,)) for option in FILTERS.options())
    return (*INPUT_OPTIONS, *filters, *AFTER_FILTER_OPTIONS, *web.step_options(), *WEB_OPTIONS, *PHASES.options(),
            *EXECUTION_OPTIONS)


def unused_options(pipeline_ref: str | None, given: set[str]) -> tuple[str, list[RunOption]]:
    """The pipeline's name and the options among ``given`` that it does not use. A pipeline
    of the user's own (MODULE:FUNCTION) may use any of them."""
    pipeline = pipeline_ref or DEFAULT_PIPELINE
    if pipeline not in (DEFAULT_PIPELINE, *BUILT_IN_PIPELINES):
        return pipeline, []
    return pipeline, [option for option in run_options()
                      if option.pipelines and pipeline not in option.pipelines and option.name in given]


def option_named(name: str) -> RunOption:
    for option in run_options():
        if option.name == name:
            return option
    raise KeyError(name)


def job_script_facts() -> ScriptFacts:
    """What the rendered job scripts say about the run: formats, and the variables they forward."""
    return ScriptFacts(tuple(input_formats()), tuple(output_formats()), tuple(name for o in run_options() for name in (o.variable, *o.old_variables)))


def markdown_rows() -> list[str]:
    """The option table of docs/options.md, one row per option (a test keeps the doc equal to it)."""
    rows = ["| flag | variable | default | what |", "|---|---|---|---|"]
    for option in run_options():
        rows.append(f"| `{option.flag}` | `{option.variable}` | {option.default_shown} | "
                    f"{option.help.replace('|', '/')} |")
    return rows
