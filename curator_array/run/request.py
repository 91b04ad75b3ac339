"""The request: what one start of ``curator-array run`` runs, as typed values.

``RunRequest`` holds the pipeline options (what the run computes) and how this start runs
them (checkpoint, phase, Ray, several nodes). It is built from the resolved values of
the option table (``option_table``, ``precedence``); the same values, pinned in the
checkpoint for a submitted run, are a ``core.records.PinnedRequest``. A plain value with no
heavy imports, so a run can parse its request and launch its Ray head before it imports
pyarrow, Ray Data or the stages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.layout import CheckpointLayout
from ..core.phase import PhaseSettings
from ..core.records.run import PinnedRequest
from ..execution.ray_cluster import WORKER_JOIN_TIMEOUT_S, NodeOptions
from ..pipelines.options import PipelineOptions
from ..stages.defaults import DOWNLOAD_SLOT
from .progress import PROGRESS_INTERVAL_S

# Where a run's Ray cluster lives: a private head on this node, or one over the job's nodes.
CLUSTERS = ("local", "slurm")

if TYPE_CHECKING:
    from ..pipelines.pipeline import Pipeline
    from ..slurm.jobenv import JobEnvironment


@dataclass
class RunRequest:
    """What to run (``options``) and how: checkpoint, pipeline, Ray and multi-node settings."""

    options: PipelineOptions
    checkpoint_path: str | None = None
    request: str | None = None
    pipeline_ref: str | None = None
    force: bool = False
    new_run: bool = False
    relist: bool = False
    repair: bool = False  # accept mended inputs and a new malformed-record policy for unfinished tasks
    ray_address: str | None = None
    num_cpus: int | None = None
    object_store_memory: int | None = None
    ray_temp_dir: str | None = None
    stall_timeout: float | None = None
    progress: bool | None = None
    progress_interval: float = PROGRESS_INTERVAL_S
    profile: bool = False
    cluster: str = CLUSTERS[0]
    rendezvous_dir: str | None = None
    worker_join_timeout: float = WORKER_JOIN_TIMEOUT_S
    node_ip: str | None = None
    phase: str | None = None  # None: the root phase's shard, then (outside an array) every later phase ready
    # The run options it was resolved from, with where each came from, as a record to pin.
    pinned: PinnedRequest | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_flags(cls, flags: Mapping[str, object], phases: PhaseSettings | None = None) -> RunRequest:
        """Split the flat ``run`` values into pipeline options (with the later phases'
        settings, ``phases``) and how this start runs them."""
        own = {f.name for f in fields(cls)}
        return cls(PipelineOptions.from_values(flags, phases), **{k: v for k, v in flags.items() if k in own})

    @property
    def checkpoint(self) -> str:
        return self.checkpoint_path or self.options.output_dir

    @property
    def layout(self) -> CheckpointLayout:
        return CheckpointLayout(self.checkpoint)

    @property
    def rendezvous_root(self) -> Path:
        """Where the nodes of a multi-node element meet: the option, else under the checkpoint."""
        return Path(self.rendezvous_dir) if self.rendezvous_dir else self.layout.rendezvous_root

    def with_crawls(self, refresh: bool = False, save: bool = True) -> RunRequest:
        """This request with its crawls' paths lists resolved (``run.crawls``): read from the
        run, or fetched where it has none yet (``refresh``: fetched again and checked against
        the run's; without ``save``, a dry run's, nothing is written). The one step of
        building a run's pipeline that may use the network: submit and a shard's start take
        it once, before the pipeline is built."""
        from dataclasses import replace

        if not self.options.crawl:
            return self
        from .crawls import crawl_paths_files

        saved = crawl_paths_files(self.options.crawl, self.options.crawl_base_url, self.layout, refresh=refresh,
                                  save=save, retries=self.options.download_retries,
                                  read_timeout_s=self.options.download_timeout)
        return replace(self, options=replace(self.options, crawl_lists=tuple(map(str, saved))))

    def with_selection(self, phases: Any, refresh: bool = False, save: bool = True) -> RunRequest:
        """This request reading the output of the run ``--select-from`` names, as this run pinned
        it (``run.selected_run``; ``phases``: the phase registry, which says whether that run is
        complete): resolved on the first start, compared again with ``refresh``."""
        from dataclasses import replace

        if not self.options.select_from:
            return self
        from .selected_run import resolve_selected_run

        found = resolve_selected_run(self.options.select_from, self.layout, phases, refresh=refresh, save=save)
        where = self.options.filter_options.get("where")
        if where and refresh:
            from ..stages.selection import check_expression

            check_expression(where, found.schema())
        return replace(self, options=self.options.selecting(found.output_dir, found.output_format, found.identity()))

    def pipeline(self, phases: Any, check_selection: bool = False) -> Pipeline:
        """The pipeline a start of this request runs: its crawls (as the run saved them) and
        selected run resolved (``check_selection``: compared again, as a submission does), then built."""
        return self.with_crawls().with_selection(phases, refresh=check_selection).build_pipeline(phases)

    def build_pipeline(self, phases: Any) -> Pipeline:
        """The pipeline as the run runs it (``Pipeline.for_run``; ``phases``: the phase
        registry, which says what the later phases need of it); no I/O: a crawl's paths list is
        resolved before (``with_crawls``)."""
        from ..pipelines.pipeline import pipeline_for_run

        options = self.options
        if options.crawl and not options.crawl_lists:
            raise RuntimeError("the crawls' paths lists are resolved before the pipeline is built (with_crawls)")
        if options.select_from and not options.selected_from:
            raise RuntimeError("the selected run is resolved before the pipeline is built (with_selection)")
        return pipeline_for_run(self.pipeline_ref, options, phases.before_writer(options))

    def node_options(self, job: JobEnvironment) -> NodeOptions:
        return NodeOptions(
            num_cpus=self.num_cpus or job.cpus_on_node or job.cpus_per_task,
            num_gpus=job.gpus_on_node,
            object_store_memory=self.object_store_memory,
            job_memory_mb=job.mem_per_node_mb,
            # Download slots make the per-node download cap hard on clusters we start.
            custom_resources={DOWNLOAD_SLOT: float(max(1, math.ceil(self.options.download_workers_per_node)))},
        )
