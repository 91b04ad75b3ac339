"""``--pipeline dclm`` as it is built from run options: its stages for WARC and for text
input, DCLM-Baseline's quality threshold given to each model without one, and refusals."""

from __future__ import annotations

import pytest

from curator_array.core.errors import ConfigError
from curator_array.pipelines.options import PipelineOptions
from curator_array.pipelines.pipeline import load_pipeline
from curator_array.run.precedence import FLAG, for_pipeline, options_for_start
from curator_array.stages.defaults import DCLM_QUALITY_THRESHOLD


def stage_names(tmp_path, **values) -> list[str]:
    options = PipelineOptions.of(tmp_path, tmp_path / "out", **values)
    pipeline = load_pipeline("dclm", options)
    return [stage.stage_name for stage in pipeline.stages]


def test_warc_input_is_extracted_and_text_input_is_read_as_it_is(tmp_path):
    assert stage_names(tmp_path, input_file_type="warc") == ["warc_reader", "html_extract", "dclm", "parquet_writer"]
    assert stage_names(tmp_path, input_file_type="jsonl") == ["jsonl_reader", "dclm", "parquet_writer"]
    with pytest.raises(ConfigError, match="not --input-file-type"):
        stage_names(tmp_path, input_file_type="csv")


def test_each_quality_model_without_a_threshold_gets_dclm_baselines(tmp_path):
    for name in ("hq.bin", "eli5.bin"):
        (tmp_path / name).write_bytes(b"model")
    models = (f"hq={tmp_path / 'hq.bin'}", f"eli5={tmp_path / 'eli5.bin'}")
    base = {"pipeline_ref": "dclm", "output_dir": str(tmp_path / "out"), "quality_model": models}
    chosen = options_for_start(base, {})
    assert chosen["quality_threshold"].value == (f"hq={DCLM_QUALITY_THRESHOLD}", f"eli5={DCLM_QUALITY_THRESHOLD}")
    assert chosen["quality_threshold"].source == "--pipeline dclm"
    given = options_for_start({**base, "quality_threshold": ("hq=0.5",)}, {})
    assert given["quality_threshold"].value == ("hq=0.5",) and given["quality_threshold"].source == FLAG
    other = options_for_start({**base, "pipeline_ref": "fineweb"}, {})
    assert not other["quality_threshold"].value
    assert for_pipeline(options_for_start({"output_dir": str(tmp_path)}, {}))["quality_threshold"].value in ((), None)


def test_a_language_model_without_english_is_refused_when_the_pipeline_is_built(tmp_path):
    from curator_array.classify.training import Hyperparameters, train
    from tests.conftest import need
    from tests.support.quality_corpus import trainer_installed

    need(trainer_installed(), "the fastText trainer is not installed (make install does it)")
    positive, negative = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    positive.write_text('{"text": "good text about the bridge over the river"}\n' * 20)
    negative.write_text('{"text": "other words of a different kind entirely"}\n' * 20)
    model = tmp_path / "two-labels.bin"
    train([str(positive)], [str(negative)], model, settings=Hyperparameters(bucket=1000))
    with pytest.raises(ConfigError, match="has no label en"):
        stage_names(tmp_path, input_file_type="jsonl", language_model=str(model))
