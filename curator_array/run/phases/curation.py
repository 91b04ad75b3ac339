"""The first phase: each logical shard runs the pipeline on Ray Data (``run.shard``).

Its elements are the spec's shards and its records the spec's completion manifests, so
nemo-curator and curator-array read each other's runs; its figures are ``CurationCounts``
(``core.curation_counts``), read from those manifests as any phase's are. The phases after it read the files
it wrote (``layouts.curated_files``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.phase import PhaseResult, RootPhase
from ...pipelines.options import CURATED_DIR
from .layouts import CURATION

if TYPE_CHECKING:
    from ..lifecycle import PhaseContext


class Curation(RootPhase):
    name = CURATION
    staging_dir = CURATED_DIR

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        """Run this shard on a Ray cluster of its own; its manifest is written as the spec says."""
        from ..shard import run_curation_shard

        outcome = run_curation_shard(context)
        work = outcome.work if outcome is not None else None
        return PhaseResult(work.counts if work is not None else self.counts(),
                           outcome.exit_code if outcome is not None else 0)
