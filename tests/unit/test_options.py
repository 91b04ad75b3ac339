"""One definition per run option: its variable, its flag, its parsing, its precedence."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from curator_array.cli import main
from curator_array.core.errors import ConfigError
from curator_array.core.options import EXECUTION_GROUPS, PREFIX
from curator_array.run.option_table import job_script_facts, markdown_rows, run_options
from curator_array.run.precedence import DEFAULT, ENVIRONMENT, FLAG, SITE, own_sources
from curator_array.run.precedence import resolve as resolve_sources
from curator_array.slurm.sites import load_site, render_site, site_names
from tests.conftest import REPO

SITES = REPO / "site_configs"


def resolve(flags, environment, site_env=None, site_label=SITE):
    """What a start or a submission resolves from what it is given itself."""
    return resolve_sources(own_sources(flags, environment, site_env, site_label))


SPEC_NAMES = {"input_dir": "INPUT_DIR", "output_dir": "OUTPUT_DIR", "checkpoint_path": "CHECKPOINT_PATH",
              "input_file_type": "INPUT_FILE_TYPE", "output_file_type": "OUTPUT_FILE_TYPE",
              "files_per_partition": "FILES_PER_PARTITION"}


def test_every_option_has_its_own_variable_by_the_documented_rule():
    assert len({o.variable for o in run_options()}) == len(run_options()), "two options share a variable"
    for option in run_options():
        plain = option.flag[2:].replace("-", "_").upper()
        expected = option.variable_name or (PREFIX + plain if option.group in EXECUTION_GROUPS else plain)
        assert option.variable == expected, option.name
    for name, variable in SPEC_NAMES.items():
        assert next(o for o in run_options() if o.name == name).variable == variable
    assert not [o.variable_name for o in run_options() if o.variable_name and o.variable_name.startswith(
        ("CURATOR_PIPELINE", "MALFORMED", "HTML"))], "the flag in capitals, as the README promises"


def test_an_old_variable_name_is_still_read_with_one_warning(caplog):
    """MALFORMED_RECORDS, HTML_EXTRACTOR and CURATOR_PIPELINE became MALFORMED, EXTRACTOR, PIPELINE."""
    from curator_array.run import precedence

    precedence._WARNED.clear()
    for _ in range(2):
        chosen = resolve({}, {"MALFORMED_RECORDS": "skip", "HTML_EXTRACTOR": "trafilatura",
                              "CURATOR_PIPELINE": "commoncrawl"})
    assert (chosen["malformed"].value, chosen["extractor"].value, chosen["pipeline_ref"].value) == (
        "skip", "trafilatura", "commoncrawl")
    warnings = [r.getMessage() for r in caplog.records if "old name" in r.getMessage()]
    assert sorted(w.split()[0] for w in warnings) == ["CURATOR_PIPELINE", "HTML_EXTRACTOR", "MALFORMED_RECORDS"]
    assert "MALFORMED_RECORDS is the old name of MALFORMED (the flag --malformed in capitals)" in warnings[-1] + \
        "".join(warnings)
    assert resolve({}, {"MALFORMED": "fail", "MALFORMED_RECORDS": "skip"})["malformed"].value == "fail", \
        "the new name wins"


@pytest.mark.parametrize("name", [n for n in site_names(SITES)])
def test_container_scripts_forward_every_variable(name):
    """pyxis and Apptainer pass only what the script names; Charliecloud and bare metal pass everything."""
    site = load_site(SITES / f"{name}.toml")
    text = render_site(site, SITES / "templates", job_script_facts())
    if site.runtime not in ("pyxis", "apptainer"):
        assert "passed_names" not in text
        return
    forwarded = re.search(r"^passed_names=(\S+)$", text, re.M).group(1).strip("'").split(",")
    missing = {o.variable for o in run_options()} - set(forwarded)
    assert not missing, f"{name}.sbatch does not forward {sorted(missing)}"
    assert {"SHARD_INDEX_OFFSET", "TOTAL_SHARDS", "MINIMUM_SHARD_INDEX", "CURATOR_ARRAY_SITE_ENV",
            *site.env} <= set(forwarded)


def test_help_names_every_variable(capsys):
    main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in run_options():
        assert f"(env: {option.variable})" in text, option.name


def test_precedence_flag_then_site_then_environment_then_default():
    environment = {"MIN_WORDS": "3", "MAX_WORDS": "30", "DEDUP_WITHIN_TASK": "yes", "LANGUAGES": "de, ja"}
    site = {"MIN_WORDS": "4", "MAX_WORDS": "40"}
    settings = resolve({"min_words": 5}, environment, site)
    assert (settings["min_words"].value, settings["min_words"].source) == (5, FLAG)
    assert (settings["max_words"].value, settings["max_words"].source) == (40, SITE)
    assert (settings["dedup_within_task"].value, settings["dedup_within_task"].source) == (True, ENVIRONMENT)
    assert settings["languages"].value == ("de", "ja")
    assert (settings["malformed"].value, settings["malformed"].source) == ("fail", DEFAULT)


def test_an_element_tells_its_site_variables_from_the_callers():
    environment = {"MIN_WORDS": "4", "DEDUP_WITHIN_TASK": "1", "CURATOR_ARRAY_SITE_ENV": "MIN_WORDS,TMPDIR"}
    settings = resolve({}, environment)
    assert settings["min_words"].source == SITE and settings["dedup_within_task"].source == ENVIRONMENT


def test_an_empty_variable_counts_as_unset():
    assert resolve({}, {"MIN_WORDS": "", "MALFORMED": " "})["min_words"].source == DEFAULT


@pytest.mark.parametrize("variable, value, message", [
    ("MIN_WORDS", "x", "MIN_WORDS='x' from the environment: not an integer"),
    ("MIN_WORDS", "-1", "MIN_WORDS='-1' from the environment: must be at least 0"),
    ("MIN_LANGUAGE_SCORE", "2", "MIN_LANGUAGE_SCORE='2' from the environment: must be at most 1"),
    ("DOWNLOAD_WORKERS_PER_NODE", "0", "DOWNLOAD_WORKERS_PER_NODE='0' from the environment: must be above 0"),
    ("MALFORMED", "ignore", "MALFORMED='ignore' from the environment: not one of fail, skip"),
    ("MALFORMED_RECORDS", "ignore", "MALFORMED_RECORDS='ignore' from the environment: not one of fail, skip"),
    ("DEDUP_WITHIN_TASK", "maybe", "DEDUP_WITHIN_TASK='maybe' from the environment: not a boolean"),
    ("DEDUP", "1", "DEDUP='1' from the environment: '1' is not one of urls, lines, paragraphs, exact, fuzzy (the per-task "
                   "exact dedup is --dedup-within-task)"),
    ("DEDUP", "fuzzy,fuzzy", "DEDUP='fuzzy,fuzzy' from the environment: fuzzy given twice"),
    ("INPUT_FILE_TYPE", "csv", "INPUT_FILE_TYPE='csv' from the environment: not one of jsonl"),
    ("INPUT_URLS", "/no/such/list", "INPUT_URLS='/no/such/list' from the environment: /no/such/list does not exist"),
    ("OUTPUT_FILE_SIZE", "100K", "OUTPUT_FILE_SIZE='100K' from the environment: must be at least 1M"),
    ("OUTPUT_FILE_SIZE", "big", "OUTPUT_FILE_SIZE='big' from the environment: not a size"),
])
def test_a_bad_variable_names_itself_its_value_and_where_it_came_from(variable, value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        resolve({}, {variable: value})


def test_a_bad_site_value_says_it_came_from_the_site():
    with pytest.raises(ConfigError, match=re.escape("MIN_WORDS='many' from site [env] of x.toml: not an integer")):
        resolve({}, {}, {"MIN_WORDS": "many"}, "site [env] of x.toml")


def test_values_show_as_a_user_writes_them():
    options = {o.name: o for o in run_options()}
    size = next(o for o in run_options() if o.kind == "size")
    assert size.show(10 * 2**30) == "10GiB" and size.show(10 * 10**9) == "10G" and size.show(1234) == "1234"
    assert options["keep_removed"].show(True) == "true" and options["keep_removed"].show(False) == "false"


def test_every_option_parses_what_it_shows():
    for option in run_options():
        for value in (option.default, *(option.choices[-1:])):
            if value in (None, ()) or option.kind == "existing-paths":
                continue
            assert option.parse(option.show(value)) == value, option.name


def test_the_docs_list_every_option_as_the_table_defines_it():
    doc = (REPO / "docs" / "options.md").read_text().splitlines()
    start = doc.index("| flag | variable | default | what |")
    assert doc[start:doc.index("", start)] == markdown_rows(), "docs/options.md's option table is stale"


def test_submit_refuses_a_bad_value_before_anything_is_written_or_queued(tmp_path, capsys, monkeypatch):
    from curator_array.core.layout import CheckpointLayout

    sites = REPO / "site_configs"
    out = tmp_path / "out"
    monkeypatch.setenv("INPUT_DIR", str(REPO / "sample_data" / "jsonl"))
    monkeypatch.setenv("OUTPUT_DIR", str(out))
    monkeypatch.setenv("MIN_WORDS", "x")
    monkeypatch.setenv("PATH", "/nonexistent")  # no sbatch: queueing anything would fail differently
    code = main(["submit", "--site", "local", "--sites-dir", str(sites), "--total-shards", "2"])
    assert code == 2
    assert capsys.readouterr().err.strip() == "curator-array: error: MIN_WORDS='x' from the environment: not an integer"
    assert not CheckpointLayout(out).metadata_dir.exists()


def test_relative_paths_are_pinned_absolute_at_submit(tmp_path, capsys, monkeypatch):
    """The sbatch line and the run's options hold absolute paths, whatever directory the job starts in."""
    import shutil

    shutil.copytree(REPO / "sample_data" / "jsonl", tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    code = main(["submit", "--site", "local", "--sites-dir", str(REPO / "site_configs"), "--total-shards", "2",
                 "--dry-run", "--max-array-size", "1000", "--", "--input-dir", "data", "--output-dir", "./out"])
    out = capsys.readouterr().out
    assert code == 0 and f"INPUT_DIR={tmp_path / 'data'}" in out and f"OUTPUT_DIR={tmp_path / 'out'}" in out, out
    from curator_array.core.options import absolute

    assert absolute("~/x") == str(Path.home() / "x") and absolute("s3://bucket/x") == "s3://bucket/x"


def test_status_and_its_json_show_the_options_and_their_sources(tmp_path, capsys):
    import json

    from curator_array.core.layout import CheckpointLayout
    from curator_array.core.run_contract import ensure_run_config
    from curator_array.core.sharding import ShardRange
    from curator_array.run.precedence import pinned_request

    settings = resolve({"min_words": 5}, {"MALFORMED": "skip", "OUTPUT_DIR": str(tmp_path / "out"),
                                          "INPUT_DIR": "/in"})
    layout = CheckpointLayout(tmp_path / "ckpt")
    request_id = pinned_request(settings).write(layout)
    ensure_run_config(layout, ShardRange(2), ["a", "b"], request=request_id)
    assert main(["status", "--checkpoint-path", str(layout.root)]) == 0
    out = capsys.readouterr().out
    assert f"options      4 set, the rest default (request {request_id}):" in out
    assert "  malformed=skip (environment)" in out and "  min_words=5 (flag)" in out
    assert main(["status", "--checkpoint-path", str(layout.root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["request"] == request_id
    assert data["options"]["min_words"] == {"value": 5, "source": "flag"}
    assert data["options"]["dedup_within_task"] == {"value": False, "source": "default"}


def test_retry_starts_from_the_pinned_options_with_its_flags_on_top(tmp_path):
    from curator_array.core.layout import CheckpointLayout
    from curator_array.core.run_contract import ensure_run_config
    from curator_array.core.sharding import ShardRange
    from curator_array.run.precedence import pinned_request
    from curator_array.run.submission import retry_options

    pinned = resolve({"min_words": 5, "stall_timeout": 60.0}, {"OUTPUT_DIR": "/out", "INPUT_DIR": "/in"})
    layout = CheckpointLayout(tmp_path)
    ensure_run_config(layout, ShardRange(2), ["a", "b"], request=pinned_request(pinned).write(layout))
    settings = retry_options(layout, {"stall_timeout": 600.0}, {"MIN_WORDS": "7"})
    assert settings["min_words"].value == 5, "the run carries its options; the retry's environment does not change them"
    assert (settings["stall_timeout"].value, settings["stall_timeout"].source) == (600.0, FLAG)
    assert settings["output_dir"].value == "/out"


def test_an_option_the_pipeline_does_not_use_is_refused_as_a_flag_and_warned_about_as_a_variable(caplog):
    from curator_array.run import precedence
    from curator_array.run.precedence import options_for_start

    precedence._WARNED.clear()
    with pytest.raises(ConfigError, match=re.escape(
            "--languages does nothing with the default pipeline (it is for commoncrawl, fineweb): leave it out")):
        options_for_start({"languages": ("en",)}, {})
    with pytest.raises(ConfigError, match=re.escape("--min-words does nothing with --pipeline fineweb (it is for the "
                                                    "default pipeline)")):
        options_for_start({"pipeline_ref": "fineweb", "min_words": 5}, {})
    with pytest.raises(ConfigError, match="--language-model does nothing with --pipeline commoncrawl .it is for fineweb"):
        options_for_start({"pipeline_ref": "commoncrawl", "language_model": __file__}, {})
    chosen = options_for_start({}, {"LANGUAGES": "en", "OUTPUT_DIR": "/tmp/x"})
    assert chosen["languages"].value == ("en",)
    assert [r.getMessage() for r in caplog.records if "does nothing" in r.getMessage()] == [
        "LANGUAGES=en from environment: --languages does nothing with the default pipeline (it is for commoncrawl, "
        "fineweb); ignored"]
    own = options_for_start({"pipeline_ref": "curator_array.pipelines.fineweb:build", "min_words": 5}, {})
    assert own["min_words"].value == 5, "a pipeline of one's own may use any option"
    assert options_for_start({"pipeline_ref": "commoncrawl", "languages": ("en",)}, {})["languages"].value == ("en",)
