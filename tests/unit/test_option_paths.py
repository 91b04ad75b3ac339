"""Every run option reaches the element, under every runtime and however the run is launched.

For each runtime (pyxis, SLURM's OCI containers, Apptainer, Charliecloud, bare metal) and each way of giving a
value (a flag to ``submit``, a variable exported at ``submit``, the site's ``[env]``, a
variable to a plain ``sbatch``), every option of the table is set to a value that is not
its default, the site's real rendered script runs, and the element's arguments and
environment are recorded where the entrypoint would start; the element's own resolution
must then give every option its value. The launch is faked (``tests/support/
fake_runtimes.py``: the runtimes' environment rules, and a ``sbatch`` that runs the first
element at once); ``tests/slurm/test_options_on_slurm.py`` runs real elements on SLURM.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from curator_array.cli.run_command import parse_run_args
from curator_array.core.layout import CheckpointLayout
from curator_array.core.options import FILE_KINDS, RunOption
from curator_array.core.phase import PhaseSettings
from curator_array.core.records.phase import PhaseManifest
from curator_array.core.run_contract import ensure_run_config
from curator_array.core.sharding import ShardRange
from curator_array.dedup.settings import DedupSettings
from curator_array.run.option_table import job_script_facts, run_options
from curator_array.run.phases import PHASES
from curator_array.run.phases.components import STEPS_QUEUED
from curator_array.run.precedence import ENVIRONMENT, FLAG, SITE, options_for_start
from curator_array.run.submission import run_request_id
from curator_array.stages.web.fasttext_language import bundled_model
from tests.conftest import REPO, SAMPLE, curator_cli
from tests.support.fake_runtimes import install_fakes, install_recording_image
from tests.support.in_process import curator_in_process
from tests.support.tokenizer import train_tokenizer

RUNTIMES = ("pyxis", "oci", "apptainer", "charliecloud", "baremetal")
WAYS = ("submit flag", "submit variable", "site env", "sbatch variable")
# The later phases' elements are queued by submit, each through the script of the first: one
# container runtime and bare metal show they get only the request and their phase.
LATER_PHASE_RUNTIMES = ("oci", "baremetal")
# Chosen by the job, not by the user: the entrypoint passes --cluster, submit passes --request.
NOT_GIVEN = {"cluster", "request"}
# Options that refuse others (--annotate: the later phases and --keep-removed) reach the element
# in a run of their own, beside the options they combine with.
ALONE = {"annotate": ("keep_removed", "dedup", "quality_model", "tokenize", "stats"),  # options, or settings keys of phases
         "select_from": ("input_dir", "input_urls", "crawl", "crawl_files", "crawl_base_url"),
         "dedup_line_min_chars": ("dedup_paragraph_ngram", "dedup_paragraph_min_ngram", "dedup_paragraph_threshold")}
# ... with values of their own: a selection reads Parquet or JSONL, not the commoncrawl builder's WARCs.
ALONE_VALUES = {"select_from": {"pipeline_ref": "curator_array.pipelines.pipeline:default_pipeline"},
                "dedup_line_min_chars": {"dedup": "urls,lines,exact"}}  # a run does lines or paragraphs
IMAGE_ENV = {"PATH": "/opt/curator-array/venv/bin:/usr/bin:/bin", "VIRTUAL_ENV": "/opt/curator-array/venv",
             "CURATOR_ARRAY_PYTHON": "/opt/curator-array/venv/bin/python", "RAY_USAGE_STATS_ENABLED": "0"}
# The commoncrawl builder by reference: a pipeline of one's own may use every option (a built-in
# pipeline refuses the ones it does not use).
TEXT_VALUES = {"text_field": "body", "pipeline_ref": "curator_array.pipelines.commoncrawl:build", "node_ip": "10.9.8.7",
               "ray_address": "127.0.0.1:9", "crawl_files": "0:1", "where": "length(text) > 3", "stats_group_by": "language", "rehydrate": "1:1,2-9:2", "phase": "curation", "eos_token": "<|endoftext|>",
               "dedup_language": "de", "dedup": "urls,paragraphs,exact", "quality_label": "__label__en", "quality_threshold": ("lid=0.25",),
               "keep_top_fraction": ("lid=0.5",)}
CRAWLS = ("CC-TEST-1", "CC-TEST-2")


def value_of(option: RunOption, paths: dict[str, object]):
    """A value of ``option`` that is not its default (paths: from ``paths``)."""
    if option.name in paths:
        return paths[option.name]
    if option.kind in ("flag", "switch"):
        return True
    if option.kind in ("int", "size"):
        return int(option.minimum or 0) + 3
    if option.kind == "float":
        return 0.5 if option.maximum == 1 else float(option.minimum or 0) + 2.5
    if option.kind == "choice":
        return next(choice for choice in option.choices if choice != option.default)
    if option.kind == "choices":
        return TEXT_VALUES.get(option.name, f"{option.choices[0]},{option.choices[-1]}")
    if option.kind == "list":
        return ("de", "ja")
    return TEXT_VALUES[option.name]


def arguments(values: dict[str, object]) -> list[str]:
    args: list[str] = []
    for option in run_options():
        if option.name not in values:
            continue
        value = values[option.name]
        if option.kind in ("flag", "switch"):
            args.append(option.flag)
        elif option.kind in ("existing-paths", "files"):
            for path in value:
                args += [option.flag, path]
        else:
            args += [option.flag, option.show(value)]
    return args


def variables(values: dict[str, object]) -> dict[str, str]:
    return {o.variable: o.show(values[o.name]) for o in run_options() if o.name in values}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("paths")
    shutil.copytree(SAMPLE / "jsonl", root / "input")
    (root / "urls.txt").write_text(f"file://{root / 'input' / 'part-000.jsonl'}\n")
    (root / "quality.toml").write_text("[ja]\nmin_words = 30\n")
    (root / "mix.toml").write_text("max_epochs = 4\n")
    (root / "blocked.txt").write_text("blocked.example\n")
    (root / "evals.jsonl").write_text('{"text": "an eval answer of more than thirteen words, long enough to be indexed as it is"}\n')
    (root / "lid.ftz").write_bytes(bundled_model().read_bytes())
    train_tokenizer(["words for a tokenizer, again and again"] * 20, root / "tokenizer.json", 300)
    for crawl in CRAWLS:  # a crawl-data/ tree served from disk, as a site-local copy would be
        (root / "mirror" / "crawl-data" / crawl).mkdir(parents=True)
        (root / "mirror" / "crawl-data" / crawl / "warc.paths.gz").write_bytes(
            gzip.compress(f"crawl-data/{crawl}/segments/0/warc/a.warc.gz\n".encode()))
    curator_cli("run", "--input-dir", str(root / "input"), "--output-dir", str(root / "finished"), "--num-cpus", "1",
                "--no-progress")  # a finished run, for --select-from
    earlier = CheckpointLayout(root / "earlier")  # the records of an earlier run, for --dedup-against
    run = ensure_run_config(earlier, ShardRange(1), ["task"], PhaseSettings({"dedup": DedupSettings("exact")}).fingerprint())
    PhaseManifest("signatures", 0, 1, run.run_id).write(PHASES.get("signatures").layout_of(earlier))
    record = root / "record.jsonl"
    image = install_recording_image(root / "image", record)
    (root / "bundle" / "rootfs" / "usr").mkdir(parents=True)  # an OCI bundle, for the oci job script to derive from
    (root / "bundle" / "config.json").write_text(json.dumps({"process": {"args": ["sh"]}, "mounts": [],
                                                             "linux": {"namespaces": [{"type": "mount"}]}}))
    fakes = install_fakes(root / "bin", ["apptainer", "srun", "ch-run", "sbatch", "squeue", "scontrol"], IMAGE_ENV)
    return root, record, image, fakes


def values_for(root: Path, case: Path, start_options: bool) -> dict[str, object]:
    paths = {"input_dir": str(root / "input"), "output_dir": str(case / "out"), "checkpoint_path": str(case / "ckpt"),
             "input_urls": (str(root / "urls.txt"),), "download_dir": str(case / "downloads"),
             "ray_temp_dir": str(case / "raytmp"), "rendezvous_dir": str(case / "meet"),
             "quality_settings": str(root / "quality.toml"), "crawl": CRAWLS,
             "crawl_base_url": f"file://{root / 'mirror'}/", "dedup_against": (str(root / "earlier"),),
             "tokenize": str(root / "tokenizer.json"), "url_blocklist": (str(root / "blocked.txt"),),
             "decontaminate": (str(root / "evals.jsonl"),),
             "language_model": str(root / "lid.ftz"), "blocklists_dir": str(root / "lists"),
             "quality_model": (f"lid={root / 'lid.ftz'}",),  # a fastText model whose labels include en
             "label_model": (f"topic={root / 'lid.ftz'}",), "select_from": str(root / "finished"),
             "mix": str(root / "mix.toml")}
    return {o.name: value_of(o, paths) for o in run_options()
            if o.name not in NOT_GIVEN and (start_options or o.scope == "run")}


def site_file(sites: Path, runtime: str, image: Path, env: dict[str, str]) -> str:
    name = f"paths-{runtime}"
    lines = [f'runtime = "{runtime}"', 'partition = "debug"', "cpus_per_task = 1", 'image = "/images/ca.sqsh"',
             f'install_dir = "{image}"', "[env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
    (sites / f"{name}.toml").write_text("\n".join(lines) + "\n")
    return name


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_option_reaches_the_element(world, tmp_path, runtime, way):
    values = values_for(world[0], tmp_path, start_options=way == "sbatch variable")
    for name in ALONE:
        del values[name]
    launch_and_check(world, tmp_path, runtime, way, values,
                     later_phases=way == "submit flag" and runtime in LATER_PHASE_RUNTIMES)


# Given to submit, an option reaches the element in the request, whatever the runtime: one runtime
# covers that way; a plain sbatch's variables cross each runtime's own way.
ALONE_CASES = [(runtime, "sbatch variable") for runtime in RUNTIMES] + [("oci", "submit flag")]


@pytest.mark.parametrize(("runtime", "way"), ALONE_CASES)
@pytest.mark.parametrize("alone", sorted(ALONE))
def test_an_option_that_refuses_others_reaches_the_element(world, tmp_path, runtime, way, alone):
    values = values_for(world[0], tmp_path, start_options=way == "sbatch variable")
    refused = {*ALONE[alone], *(o.name for phase in PHASES if phase.settings_key in ALONE[alone] for o in phase.options)}
    values = {name: value for name, value in values.items() if name not in refused and name not in set(ALONE) - {alone}}
    values.update(ALONE_VALUES.get(alone, {}))
    launch_and_check(world, tmp_path, runtime, way, values, later_phases=False)


def launch_and_check(world, tmp_path: Path, runtime: str, way: str, values: dict[str, object],
                     later_phases: bool) -> None:
    """Launch one element with ``values`` given ``way`` under ``runtime``; each must arrive.
    With ``later_phases``, the first element of every later phase runs too (about 0.3 s each),
    and each must be given only where to read the request and its phase."""
    root, record, image, fakes = world
    record.unlink(missing_ok=True)
    if way == "submit variable":  # the checkpoint is then the output dir, as by default
        del values["checkpoint_path"]
    sites = tmp_path / "sites"
    shutil.copytree(REPO / "site_configs" / "templates", sites / "templates")
    site = site_file(sites, runtime, image, variables(values) if way == "site env" else {})
    base = {"PATH": f"{fakes}:{Path(sys.executable).parent}:/usr/bin:/bin", "FAKE_IMAGE_ROOT": str(image),
            "FAKE_SBATCH_DEPENDENTS": "run" if later_phases else "queue",
            "CONTAINER_IMAGE": str(root / "bundle") if runtime == "oci" else "/images/ca.sqsh", "HOME": str(tmp_path)}
    rendered = curator_in_process("render-site", "--sites-dir", str(sites), site)
    assert rendered.returncode == 0, rendered.stderr
    cli = [sys.executable, "-m", "curator_array.cli"]
    if way == "sbatch variable":
        command = ["sbatch", "--parsable", "--array=0", str(sites / f"{site}.sbatch")]
        env = {**base, **variables(values)}
    else:
        command = [*cli, "submit", "--site", site, "--sites-dir", str(sites), "--total-shards", "1"]
        env = {**base, **(variables(values) if way == "submit variable" else {})}
        if way == "submit flag":
            command += ["--", *arguments(values)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    recorded = [json.loads(line) for line in record.read_text().splitlines()]
    element = recorded[0]  # the curation element; with --dedup, one element of each dedup phase follows
    flags = parse_run_args(element["argv"])
    settings = options_for_start(flags, element["env"])
    checkpoint = values.get("checkpoint_path", values["output_dir"])
    if way != "sbatch variable":  # a file option arrives as its copy in the checkpoint
        for option in (o for o in run_options() if o.kind in FILE_KINDS and o.name in values):
            given, arrived = values[option.name], settings[option.name].value
            pairs = zip(given, arrived) if isinstance(given, tuple) else [(given, arrived)]
            for original, copy in pairs:
                if option.kind == "named-files":
                    assert original.partition("=")[0] == copy.partition("=")[0], "the name is kept"
                    original, copy = original.partition("=")[2], copy.partition("=")[2]
                assert CheckpointLayout(checkpoint).holds(Path(copy))
                assert Path(copy).read_bytes() == Path(original).read_bytes()
            values[option.name] = arrived
    wrong = {name: (settings[name].value, value) for name, value in values.items() if settings[name].value != value}
    assert settings["checkpoint_path"].value in (None, checkpoint)
    assert not wrong, f"options that did not arrive as given ({runtime}, {way}): {wrong}"
    expected_source = {"submit flag": FLAG, "submit variable": ENVIRONMENT, "site env": SITE,
                       "sbatch variable": ENVIRONMENT}[way]
    sources = {settings[name].source for name in values}
    assert all(source.startswith(expected_source) for source in sources), sources
    if way != "sbatch variable":
        assert flags.keys() == {"checkpoint_path", "request"}, "a submitted element gets only where to read its request"
        phases = [parse_run_args(e["argv"]) for e in recorded[1:]]
        if not later_phases:
            assert phases == []
        elif "dedup" in values:
            rounds = ["components"] * STEPS_QUEUED if values["dedup_components_elements"] > 1 else ["clusters"]
            late = ["quality_after_dedup"] if "paragraphs" in values["dedup"] else []  # the models score after it
            assert [p.get("phase") for p in phases] == ["url_keys", "url_buckets", "url_removal",
                                                        "paragraph_ngrams", "paragraph_buckets", "paragraph_removal",
                                                        "signatures", "buckets", *rounds, "removal",
                                                        *late, "quality_scores",
                                                        "quality_cut", "quality_selection", "tokenize", "tokens", "shard_stats", "stats"]
        else:
            assert phases == []
        assert all(p.keys() == {"checkpoint_path", "request", "phase"} for p in phases)
        alone = options_for_start(flags, {})
        assert all(alone[name].value == value for name, value in values.items()), \
            "the request alone carries every option: nothing else needs to cross into the container"
        assert run_request_id(CheckpointLayout(checkpoint)) == flags["request"]


CLEANENV_TEMPLATE = r'''{% extends "base.sbatch.j2" %}
{% set forwards_named_variables = true %}
{% block launch %}
# From a shared install, in an emptied environment: only the variables the script names,
# and SLURM's own, reach the element.
passed=()
IFS=, read -ra names <<<"$passed_names"
for name in "${names[@]}" $(compgen -e); do
    case "$name" in SLURM_* | SLURMD_*) ;; *) [[ ",$passed_names," == *",$name,"* ]] || continue ;; esac
    [[ -v $name ]] && passed+=("$name=${!name}")
done
step=(srun --ntasks-per-node=1 env -i PATH="$PATH" "${passed[@]}" {{ site.entrypoint | sh }})
{% endblock %}
'''


def test_a_new_runtime_is_one_template_and_one_row(world, tmp_path, monkeypatch):
    """A runtime that empties the environment (``env -i``, for real): the rendered script names
    every run option's variable because its template says it forwards only named ones."""
    from curator_array.slurm import sites as site_module

    root, record, image, fakes = world
    record.unlink(missing_ok=True)
    sites = tmp_path / "sites"
    shutil.copytree(REPO / "site_configs" / "templates", sites / "templates")
    (sites / "templates" / "runtime_cleanenv.sbatch.j2").write_text(CLEANENV_TEMPLATE)
    monkeypatch.setitem(site_module.RUNTIMES, "cleanenv", site_module.Runtime(container=False))
    name = site_file(sites, "cleanenv", image, {})
    script, _ = site_module.write_rendered(sites, name, job_script_facts())
    assert subprocess.run([str(REPO / ".venv" / "bin" / "shellcheck"), str(script)], capture_output=True).returncode == 0

    values = values_for(root, tmp_path, start_options=True)
    env = {"PATH": f"{fakes}:{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
           "NOT_AN_OPTION": "stays outside", **variables(values)}
    done = subprocess.run(["sbatch", "--parsable", "--array=0", str(script)], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    element = json.loads(record.read_text().splitlines()[0])
    assert "NOT_AN_OPTION" not in element["env"] and element["env"]["SLURM_ARRAY_TASK_ID"] == "0"
    arrived = options_for_start(parse_run_args(element["argv"]), element["env"])
    wrong = {name: (arrived[name].value, value) for name, value in values.items() if arrived[name].value != value}
    assert not wrong, f"options that did not reach the element: {wrong}"
