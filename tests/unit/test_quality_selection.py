"""Selection by model, without Ray: the run-wide cut and buckets from merged histograms
against an exact sort, the scorer stage on a real fastText model, the plan and the chain of
output writers, and every refusal of bad settings."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

from curator_array.classify.model import (
    load_model,
    model_labels,
    quality_probabilities,
    quality_probability,
)
from curator_array.classify.settings import QUALITY, QualitySettings
from curator_array.core.errors import ConfigError
from curator_array.core.phase import OutputChain, PhaseSettings, needed
from curator_array.core.sharding import ShardRange
from curator_array.dedup.settings import DedupSettings
from curator_array.run.option_table import option_named
from curator_array.run.phases import PHASES
from curator_array.run.phases.quality import BINS, ScoreHistogram, score_bins
from curator_array.stages.classifiers import QualityScorer
from curator_array.stages.tasks import DocumentBatch, FailedTask
from curator_array.stages.web.fasttext_language import bundled_model

RNG = np.random.default_rng(7)


def scores_like_a_classifier(count: int) -> np.ndarray:
    """Probabilities as a binary classifier gives them: float32, piled up near 0 and 1."""
    mixed = np.concatenate([RNG.beta(0.4, 3.0, count // 2), RNG.beta(3.0, 0.6, count - count // 2)])
    return mixed.astype(np.float32).astype(np.float64)


def histogram_of(scores: np.ndarray, tokens: np.ndarray | None = None, shards: int = 4) -> ScoreHistogram:
    tokens = np.ones(len(scores)) if tokens is None else tokens
    parts = [ScoreHistogram.of(score_bins(scores[s::shards]), tokens[s::shards]) for s in range(shards)]
    return ScoreHistogram.merged(parts)


@pytest.mark.parametrize("fraction", [0.001, 0.1, 0.35, 0.9, 1.0])
def test_the_top_fraction_of_merged_shards_matches_an_exact_sort_within_a_tenth_of_a_point(fraction):
    scores = scores_like_a_classifier(300_000)
    threshold_bin, kept = histogram_of(scores).top_cut(fraction)
    chosen = scores >= threshold_bin / BINS
    assert int(chosen.sum()) == kept, "the threshold keeps exactly the documents it counted"
    exact = np.sort(scores)[::-1][max(0, round(fraction * len(scores)) - 1)]  # the score of the last one kept
    assert abs(kept / len(scores) - fraction) * 100 < 0.1
    assert abs(int((scores >= exact).sum()) - kept) <= np.sum(score_bins(scores) == threshold_bin), \
        "it differs from the exact sort only by documents sharing the threshold's bin"


def test_shard_histograms_merge_to_the_whole_runs():
    scores = scores_like_a_classifier(50_000)
    tokens = RNG.integers(1, 3000, len(scores)).astype(np.float64)
    whole, merged = ScoreHistogram.of(score_bins(scores), tokens), histogram_of(scores, tokens, shards=7)
    for name in ("bins", "documents", "tokens"):
        assert np.array_equal(getattr(whole, name), getattr(merged, name)), name


def test_bins_are_exact_at_their_edges():
    edges = np.arange(0, BINS + 1, 9973, dtype=np.int64)
    at = edges / BINS
    below = np.nextafter(at, -1.0)
    assert np.array_equal(score_bins(at), edges) and np.all(score_bins(below[1:]) == edges[1:] - 1)
    assert score_bins(np.array([1.0, 0.0]))[0] == BINS


@pytest.mark.parametrize("by_tokens", [False, True])
def test_buckets_split_the_weight_evenly(by_tokens):
    scores = scores_like_a_classifier(200_000)
    tokens = RNG.pareto(1.5, len(scores)) * 400 + 20
    histogram = histogram_of(scores, tokens)
    edges = histogram.edges(20, by_tokens)
    buckets = np.searchsorted(np.asarray(edges), score_bins(scores), side="right")
    weights = tokens if by_tokens else np.ones(len(scores))
    shares = np.bincount(buckets, weights=weights, minlength=20) / weights.sum()
    assert set(buckets.tolist()) == set(range(20))
    assert np.all(np.abs(shares - 0.05) < (0.01 if by_tokens else 0.0005)), shares
    assert edges == sorted(edges)


@pytest.fixture(scope="module")
def language_model(tmp_path_factory):
    """A real fastText model (the bundled language identifier), scoring "is it English"."""
    path = tmp_path_factory.mktemp("model") / "lid.ftz"
    path.write_bytes(bundled_model().read_bytes())
    return path


def test_the_scorer_adds_a_column_per_model_and_drops_below_a_threshold(language_model):
    texts = ["The quick brown fox jumps over the lazy dog and runs far away.", "Der schnelle braune Fuchs springt.",
             "Le renard brun rapide saute par-dessus le chien paresseux.", None]
    stage = QualityScorer({"en": str(language_model), "de": str(language_model)}, "__label__en", binary=False,
                          thresholds={"en": 0.5})
    done = stage.process(DocumentBatch("t", {}, table=pa.table({"text": texts})))
    model = load_model(language_model)
    expected = [quality_probability(model, t or "", "__label__en", binary=False) for t in texts]
    assert done.table["text"].to_pylist() == [texts[i] for i, s in enumerate(expected) if s >= 0.5]
    assert done.table["en"].to_pylist() == [s for s in expected if s >= 0.5]
    assert done.counters.dropped == {"quality_model.en": len(texts) - done.table.num_rows}


@pytest.mark.parametrize("binary", [True, False])
def test_scoring_a_batch_through_the_models_own_predictor_gives_the_one_by_one_scores(language_model, binary):
    texts = ["The quick brown fox\njumps over the lazy dog.", "", "  \n\n ", "a\rb\x0bc", "x\x85y\u2028z\u2029w",
             "Der schnelle braune Fuchs springt.\r\nÜber den Hund.", "\x00 nul", "日本語の文章です。\n二行目"]
    model = load_model(language_model)
    for label in ("__label__en", "__label__de", "__label__ja"):
        one_by_one = [quality_probability(model, t, label, binary) for t in texts]
        assert quality_probabilities(model, texts, label, binary) == one_by_one
        assert len(set(one_by_one)) > 3


@pytest.mark.parametrize(("bounds", "kept"), [
    ({"ceilings": {"en": 0.5}}, lambda s: s <= 0.5),
    ({"thresholds": {"en": 0.01}, "ceilings": {"en": 0.9}}, lambda s: 0.01 <= s <= 0.9),
])
def test_a_ceiling_drops_above_it_and_with_a_threshold_keeps_a_band(language_model, bounds, kept):
    texts = ["The quick brown fox jumps over the lazy dog and runs far away.", "Der schnelle braune Fuchs springt.",
             "The cat sat on the mat.", "Le renard brun rapide saute par-dessus le chien paresseux.", "日本語の文章です。"]
    stage = QualityScorer({"en": str(language_model)}, "__label__en", binary=False, **bounds)
    done = stage.process(DocumentBatch("t", {}, table=pa.table({"text": texts})))
    expected = [quality_probability(load_model(language_model), t, "__label__en", binary=False) for t in texts]
    assert 0 < sum(map(kept, expected)) < len(texts), "the bounds keep some and drop some"
    assert done.table["text"].to_pylist() == [t for t, s in zip(texts, expected) if kept(s)]
    assert done.counters.dropped == {"quality_model.en": len(texts) - done.table.num_rows}
    assert stage.pinned_settings()["ceilings"] == bounds["ceilings"]
    assert "ceilings" not in QualityScorer({"en": str(language_model)}, "__label__en").pinned_settings()


def test_threshold_options_read_at_least_and_at_most_into_their_settings(language_model):
    option = option_named("quality_threshold")
    assert option.parse("tox<=0.2, hq=0.1,hq<=1") == ("tox<=0.2", "hq=0.1", "hq<=1.0")
    for bad in ("hq<0.2", "hq>=0.2", "hq<=many"):
        with pytest.raises(ValueError):
            option.parse(bad)
    settings = QualitySettings.from_options({"models": (f"en={language_model}", f"tox={language_model}"),
                                             "label": "__label__en", "thresholds": ("en=0.1", "tox<=0.2", "en<=0.9")})
    assert settings.thresholds == {"en": 0.1} and settings.ceilings == {"tox": 0.2, "en": 0.9}
    assert QualitySettings.from_json(settings.to_json()) == settings


def test_the_label_scorer_keeps_every_row_and_refuses_a_column_the_input_has(language_model):
    from curator_array.stages.labels import LabelScorer

    stage = LabelScorer({"lang": str(language_model)}, top_k=2)
    texts = ["The quick brown fox jumps over the lazy dog.", "Der schnelle braune Fuchs springt.", None]
    done = stage.process(DocumentBatch("t", {}, table=pa.table({"text": texts})))
    assert done.table.num_rows == 3 and done.table["lang"].to_pylist()[:2] == ["en", "de"]
    assert done.table["lang_labels"].to_pylist()[0][0] == "en" and len(done.table["lang_probs"].to_pylist()[1]) == 2
    clash = stage.process(DocumentBatch("t", {"source_files": ["/in/a.jsonl"]},
                                        table=pa.table({"text": ["words"], "lang_prob": [0.3]})))
    assert isinstance(clash, FailedTask) and "/in/a.jsonl already has a field 'lang_prob'" in clash.reason


def test_the_scorer_refuses_a_score_column_the_input_has(language_model):
    stage = QualityScorer({"hq": str(language_model)}, "__label__en", binary=False)
    done = stage.process(DocumentBatch("t", {"source_files": ["/in/a.jsonl"]},
                                       table=pa.table({"text": ["words"], "hq": [0.3]})))
    assert isinstance(done, FailedTask) and "/in/a.jsonl already has a field 'hq'" in done.reason


def test_settings_refuse_a_label_the_model_lacks_and_names_it_has(language_model):
    with pytest.raises(ConfigError, match=r"--quality-model hq=.*lid.ftz: its labels are __label__\w+, .*not "
                                          r"__label__hq"):
        QualitySettings.from_options({"models": (f"hq={language_model}",)})
    assert "__label__en" in model_labels(load_model(language_model))


@pytest.mark.parametrize(("values", "message"), [
    ({"quality_model": ("en=M",), "keep_top_fraction": ("hq=0.1",)},
     "--keep-top-fraction hq=...: no --quality-model is named hq (the models are en)"),
    ({"quality_model": ("en=M",), "partition_by_bucket": True},
     "--partition-by-bucket needs --quality-buckets N"),
    ({"quality_model": ("en=M",), "quality_ensemble": "mean"}, "--quality-ensemble mean needs --quality-buckets N"),
    ({"quality_ensemble": "mean"}, "--quality-ensemble mean: it needs --quality-model"),
    ({"label_top_k": 3}, "--label-top-k 3: it needs --label-model"),
    ({"quality_model": ("en=M",), "quality_threshold": ("tox<=0.2",)},
     "--quality-threshold tox=...: no --quality-model is named tox"),
    ({"quality_threshold": ("hq=0.5",)}, "--quality-threshold hq=0.5: it needs --quality-model"),
    ({"keep_top_fraction": ("hq=0.5",)}, "--keep-top-fraction hq=0.5: it needs --quality-model"),
])
def test_bad_quality_options_are_refused_in_one_line(language_model, values, message):
    values = {name: tuple(v.replace("=M", f"={language_model}") for v in value) if isinstance(value, tuple) else value
              for name, value in values.items()}
    with pytest.raises(ConfigError) as refused:
        PHASES.settings_from_options({**({"quality_label": "__label__en"} if "quality_model" in values else {}),
                                      **values})
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_the_ensemble_is_pinned_only_when_not_the_default_so_older_runs_keep_their_fingerprint():
    older = {"digests": {"hq": "d"}, "label": "__label__hq", "binary": True, "thresholds": {}, "top_fractions": {},
             "buckets": 20, "partition_by_bucket": False}
    assert QualitySettings.from_json(older).to_json() == older
    mean = QualitySettings.from_json({**older, "ensemble": "mean"})
    assert mean.to_json() == {**older, "ensemble": "mean"} and mean != QualitySettings.from_json(older)
    ranked = QualitySettings.from_json({**older, "columns": ["q"]})
    assert ranked.to_json() == {**older, "columns": ["q"]} and ranked.names == ("hq", "q")


def test_score_columns_turn_the_run_wide_phases_on_without_a_model():
    settings = PHASES.settings_from_options({"quality_column": ("q", "edu"), "quality_buckets": 4}).get(QUALITY)
    assert settings.names == ("q", "edu") and not settings.digests
    assert [p.name for p in plan(settings)][1:] == ["quality_scores", "quality_cut", "quality_selection"]
    assert PHASES.before_writer(type("Options", (), {"phases": PhaseSettings({QUALITY: settings}),
                                                     "text_field": "text"})()) == [], "no model scores anything"
    for values, message in (({"quality_column": ("q",)}, "it is for --keep-top-fraction and --quality-buckets"),
                            ({"quality_column": ("q",), "quality_threshold": ("q=0.5",), "quality_buckets": 4},
                             "a --quality-column is chosen by with --where")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            PHASES.settings_from_options(values)


@pytest.mark.parametrize("text", ["hq=0", "hq=1.5", "hq=-0.1", "hq=many", "0.5", "hq=0.1,hq=0.2"])
def test_a_top_fraction_outside_zero_to_one_or_not_named_once_is_refused(text):
    with pytest.raises(ValueError):
        option_named("keep_top_fraction").parse(text)
    assert option_named("keep_top_fraction").parse("hq=1,lq=0.25") == ("hq=1.0", "lq=0.25")


def quality(**chosen) -> QualitySettings:
    return QualitySettings({"hq": "digest"}, **chosen)


def plan(settings: QualitySettings, dedup: bool = False, tokenize: bool = False) -> list:
    by_key = {QUALITY: settings, **({"dedup": DedupSettings("exact")} if dedup else {})}
    if tokenize:
        from curator_array.tokens.settings import TokenizeSettings
        by_key["tokenize"] = TokenizeSettings("tok.json", "digest")
    return PHASES.plan(PhaseSettings(by_key), ShardRange(3))


def test_a_threshold_alone_adds_no_phase_and_a_run_wide_choice_adds_three_after_dedup():
    assert [p.name for p in plan(quality(thresholds={"hq": 0.5}))] == ["curation"]
    assert not PHASES.settings_from_options({}).output_staged
    whole = [p.name for p in plan(quality(top_fractions={"hq": 0.1}), dedup=True, tokenize=True)]
    assert whole == ["curation", "signatures", "buckets", "clusters", "removal", "quality_scores", "quality_cut",
                     "quality_selection", "tokenize", "tokens"]
    assert [p.name for p in plan(quality(buckets=20))][1:] == ["quality_scores", "quality_cut", "quality_selection"]


def test_each_writer_reads_the_one_before_and_the_last_writes_the_output():
    planned = plan(quality(top_fractions={"hq": 0.1}), dedup=True, tokenize=True)
    phases = {p.name: p.phase for p in planned}
    chain = OutputChain.of([p.phase for p in planned])
    assert [w.name for w in chain.writers] == ["curation", "removal", "quality_selection"] and chain.staged
    assert chain.before(phases["signatures"]).name == "curation"
    assert chain.before(phases["quality_scores"]).name == "removal"
    assert chain.before(phases["tokenize"]).name == "quality_selection"
    assert chain.is_last(phases["quality_selection"]) and not chain.is_last(phases["removal"])
    assert [p.name for p in needed(planned, phases["tokenize"])] == ["quality_selection"], \
        "tokenize reads the output, whichever phase wrote it last"
    assert [p.name for p in needed(planned, phases["quality_scores"])] == ["removal"]
    dedup_only = PHASES.plan(PhaseSettings({"dedup": DedupSettings("exact")}), ShardRange(1))
    assert OutputChain.of([p.phase for p in dedup_only]).is_last(next(p.phase for p in dedup_only if p.name == "removal")), \
        "without the quality phases, removal writes the output as it always did"


def test_settings_round_trip_through_the_fingerprint():
    settings = QualitySettings({"hq": "a" * 64, "edu": "b" * 64}, {"hq": "/m/hq.bin"}, "__label__hq", True,
                               {"hq": 0.018112}, {"edu": 0.1}, 20, True)
    back = PHASES.settings_of(PhaseSettings({QUALITY: settings}).fingerprint()).get(QUALITY)
    assert back == settings and back.paths == {}, "read back, the models are known by their digests alone"


def test_labels_are_read_from_the_dictionary_without_loading_the_model(language_model, tmp_path):
    from curator_array.classify.model import header_labels

    assert header_labels(language_model) == model_labels(load_model(language_model))
    (tmp_path / "cut.ftz").write_bytes(language_model.read_bytes()[:3000])
    (tmp_path / "text.bin").write_text("__label__hq words\n")
    for name, message in (("cut.ftz", "its dictionary is cut short"), ("text.bin", "it does not start as one"),
                          ("none.bin", "no such model file")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            header_labels(tmp_path / name)
