"""The dedup phases' plan, records and refusals, without running a pipeline."""

from __future__ import annotations

import pytest

from curator_array.cli.status_view import watch
from curator_array.core.checkpoint import ManifestScan
from curator_array.core.errors import ConfigError
from curator_array.core.layout import AttemptId, CheckpointLayout
from curator_array.core.phase import PhaseSettings, PhaseState
from curator_array.core.phase_states import blocked_by, phase_states
from curator_array.core.records.phase import PhaseFailure, PhaseManifest
from curator_array.core.retry import format_phase_retry
from curator_array.core.run_contract import RunConfig
from curator_array.core.sharding import ShardRange
from curator_array.dedup.settings import DedupSettings, MinHashSettings
from curator_array.run.lifecycle import refuse_beyond_memory
from curator_array.run.phases import PHASES
from curator_array.run.phases.buckets import Buckets
from curator_array.run.phases.clusters import BYTES_PER_PAIR
from curator_array.run.phases.signatures import SignatureCounts
from curator_array.slurm.submit import Submission, chained, plan_submissions

CURATION = PHASES.root.name


def elements(settings: DedupSettings | None, shards: ShardRange) -> dict[str, ShardRange]:
    return {planned.name: planned.elements for planned in PHASES.plan(PhaseSettings({"dedup": settings}), shards)}


def test_each_phase_has_its_elements():
    shards = ShardRange(7, 3)
    assert elements(DedupSettings("fuzzy", buckets=3), shards) == {
        CURATION: shards, "signatures": shards, "buckets": ShardRange(3), "clusters": ShardRange(1), "removal": shards}
    assert elements(DedupSettings("exact"), shards)["buckets"] == ShardRange(7), "one bucket per shard unless told"
    assert elements(None, shards) == {CURATION: shards}, "a run without dedup has the curation phase alone"
    with pytest.raises(ValueError):
        DedupSettings("approximate")


def test_steps_plan_their_phases_in_one_order_and_a_run_pinned_before_steps_keeps_its_fingerprint():
    shards = ShardRange(4)
    steps = DedupSettings.from_options({"mode": "fuzzy,paragraphs,urls", "buckets": 2})
    assert steps.steps == ("urls", "paragraphs", "fuzzy")
    assert list(elements(steps, shards)) == [CURATION, "url_keys", "url_buckets", "url_removal", "paragraph_ngrams",
                                             "paragraph_buckets", "paragraph_removal", "signatures", "buckets",
                                             "clusters", "removal"]
    assert list(elements(DedupSettings.from_options({"mode": "lines"}), shards)) == [
        CURATION, "paragraph_ngrams", "paragraph_buckets", "paragraph_removal"]
    assert PHASES.settings_of(PhaseSettings({"dedup": steps}).fingerprint()).get("dedup") == steps
    pinned_before = {"mode": "exact", "buckets": None, "components_elements": 1, "verify": False, "threshold": 0.75,
                     "against": [], "language": "en", "keep_removed": False, "ngram": 5, "bands": 14, "rows": 8,
                     "seed": 1}
    assert DedupSettings.from_json(pinned_before).to_json() == pinned_before, "the same fingerprint on retry"
    for refused, message in (("exact,fuzzy", "both remove whole documents"), ("lines,paragraphs", "a run does one"),
                             ("minhash", "is not one of urls, lines, paragraphs, exact, fuzzy")):
        with pytest.raises(ConfigError, match=message):
            DedupSettings.from_options({"mode": refused})


def test_settings_round_trip_and_what_against_compares():
    settings = DedupSettings("fuzzy", MinHashSettings(bands=20), against=("/old",))
    assert PHASES.settings_of(PhaseSettings({"dedup": settings}).fingerprint()).get("dedup") == settings
    assert PHASES.settings_of({"stages": []}).get("dedup") is None
    assert DedupSettings("exact", MinHashSettings(bands=20)).signature_settings() == \
        DedupSettings("exact").signature_settings()
    assert DedupSettings("fuzzy", MinHashSettings(bands=20)).signature_settings() != \
        DedupSettings("fuzzy").signature_settings()


def test_states_block_later_phases_and_keep_failures_of_incomplete_elements(tmp_path):
    layout = CheckpointLayout(tmp_path)
    shards = ShardRange(3)
    plan = PHASES.plan(PhaseSettings({"dedup": DedupSettings("fuzzy", buckets=2)}), shards)
    signatures, buckets = (PHASES.get(name).layout_of(layout) for name in ("signatures", "buckets"))
    for index in range(3):
        PhaseManifest("signatures", index, 3, "run-1", SignatureCounts(5)).write(signatures)
    PhaseManifest("buckets", 0, 2, "run-1").write(buckets)
    PhaseManifest("buckets", 1, 2, "another-run").write(buckets)  # an archived run's: does not count
    PhaseFailure("buckets", 1, "a", "killed").write(buckets, AttemptId(("a",)))
    PhaseFailure("buckets", 0, "b", "an earlier try").write(buckets, AttemptId(("b",)))
    states = phase_states(layout, RunConfig(shards, run_id="run-1"), plan, ManifestScan(shards={0, 1, 2}))
    assert [(s.name, s.complete, s.missing) for s in states] == [
        (CURATION, (0, 1, 2), ()), ("signatures", (0, 1, 2), ()), ("buckets", (0,), (1,)),
        ("clusters", (), (0,)), ("removal", (), (0, 1, 2))]
    assert states[2].failed == {1: "killed"}, "a failure of an element that completed later is history"
    assert states[2].totals().to_json() == {"band_keys": 0, "candidate_pairs": 0, "pairs": 0}
    assert states[1].totals().documents == 15
    assert blocked_by(states, PHASES.get("removal")).name == "buckets" and blocked_by(states, Buckets()) is None
    assert format_phase_retry(states[2], "fields") == "1 0 0 2 buckets\n"
    assert format_phase_retry(states[4], "array") == "0-2\n"


def test_phases_wait_for_the_phase_before():
    groups = [[Submission("0-2", 0, ShardRange(3), "s.sbatch", phase=p)] for p in (None, "signatures")]
    planned = chained([*groups, [], [Submission("0", 0, ShardRange(1), "s.sbatch", phase="clusters")]], [["11"], ["12"], [], ["13"]])
    assert [item.after for item in planned] == [(), ("11",), ("12",)], "an empty phase is skipped over"
    assert planned[1].sbatch_args == ["--array=0-2", "--dependency=afterany:11"]


def test_an_element_that_cannot_fit_is_refused_naming_what_to_change():
    refuse_beyond_memory("clusters", 1_000_000, "pairs", BYTES_PER_PAIR, 4096)
    refuse_beyond_memory("clusters", 10**9, "pairs", BYTES_PER_PAIR, None)
    with pytest.raises(ConfigError, match=r"give it more memory \(memory = .* in the site file") as refused:
        refuse_beyond_memory("clusters", 100_000_000, "pairs", BYTES_PER_PAIR, 4096)
    assert f"the clusters element would hold 100,000,000 pairs, about {100_000_000 * BYTES_PER_PAIR / 2**20:,.0f} MiB" \
        in str(refused.value)


def test_a_buckets_element_whose_band_cannot_fit_names_the_bucket_count_that_would():
    from curator_array.run.phases.buckets import refuse_a_band_beyond_memory

    refuse_a_band_beyond_memory(10**9, 15, 8192)
    with pytest.raises(ConfigError, match=r"would hold 500,000,000 band keys of one band.*"
                                          r"raise --dedup-buckets \(to 15 or more"):
        refuse_a_band_beyond_memory(10**9, 2, 8192)


def test_a_phase_window_carries_its_own_total_and_offset():
    windows = plan_submissions(range(7), ShardRange(7), "s.sbatch", max_size=5, script_args=("--request", "r"),
                               phase="buckets")
    assert [(w.array_expression, w.env["SHARD_INDEX_OFFSET"], w.env["TOTAL_SHARDS"]) for w in windows] == \
        [("0-4", "0", "7"), ("0-1", "5", "7")]
    assert all(w.script_args == ("--request", "r", "--phase", "buckets") for w in windows)


def test_watch_waits_for_the_dedup_phases_and_names_the_one_left(tmp_path):
    from curator_array.core.status import RunStatus

    shards = ShardRange(1)
    status = RunStatus(tmp_path, shards, 1, [PhaseState(PHASES.root, shards, (0,), {}),
                                             PhaseState(PHASES.get("signatures"), shards, (0,), {}),
                                             PhaseState(Buckets(), ShardRange(2), (1,), {})],
                       queued={"buckets": {0: "PENDING"}})
    frames = []

    def sleep(seconds):
        status.queued = {}  # the pending bucket element was cancelled

    assert watch(lambda: status, frames.append, sleep, lambda: "now", 1, clear=False) == 3
    assert "buckets    1/2; missing 0; queued 0" in frames[0]
    assert "nothing of this run is queued any more; phase buckets incomplete (missing 0)" in frames[-1]
    status.phases[2] = PhaseState(Buckets(), ShardRange(2), (0, 1), {})
    assert watch(lambda: status, frames.append, sleep, lambda: "now", 1, clear=False) == 0
    assert frames[-1] == "every shard is complete and every later phase\n"
