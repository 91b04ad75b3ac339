"""Site configs: rendering, validation, shell safety, and the runtimes' flag syntax.

pyxis/enroot and Apptainer cannot run on these machines, so their scripts are executed
with fake `srun`/`apptainer` commands that record what they were given (the test names
say so); Charliecloud and SLURM themselves are exercised for real in tests/container.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from curator_array.core.errors import ConfigError
from curator_array.run.option_table import job_script_facts
from curator_array.slurm.sites import load_site, render_site, site_names
from tests.conftest import REPO

SITES = REPO / "site_configs"
SHELLCHECK = REPO / ".venv" / "bin" / "shellcheck"
HOSTILE = "$(touch {marker}) `touch {marker}` it's \"quoted\" ; touch {marker} & new\nline"

FAKE = r"""#!/usr/bin/env python3
# A fake {name}: records argv and environment as JSON (the real one cannot run here).
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"tool": "{name}", "argv": sys.argv[1:], "env": dict(os.environ)}}) + "\n")
{tail}
"""
# The fake srun runs its command (after its own options), so per-task wrappers execute too.
SRUN_TAIL = """args = sys.argv[1:]
while args and args[0].startswith("--"):
    args = args[1:]
if args and not os.environ.get("FAKE_SRUN_NO_EXEC"):
    os.execvp(args[0], args)
"""


def test_every_committed_script_is_fresh():
    for name in site_names(SITES):
        rendered = render_site(load_site(SITES / f"{name}.toml"), SITES / "templates", job_script_facts())
        assert (SITES / f"{name}.sbatch").read_text() == rendered, f"{name}.sbatch is stale: run `make sites`"


@pytest.mark.parametrize("name", site_names(SITES))
def test_every_script_is_shellcheck_clean_and_parses(name):
    script = SITES / f"{name}.sbatch"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    result = subprocess.run([str(SHELLCHECK), str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    assert os.stat(script).st_mode & stat.S_IXUSR


def write_site(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    templates = directory / "templates"
    if not templates.exists():
        shutil.copytree(SITES / "templates", templates)
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text,message",
    [
        ('runtime = "pyxis"\npartiton = "x"\n', r"x.toml:2: unknown key 'partiton'"),
        ('runtime = "pyxis"\nnodes = "two"\n', r"x.toml:2: key 'nodes' must be int"),
        ('runtime = "pyxis"\npartition = "a b"\n', r"x.toml:2: partition: 'a b' may only contain"),
        ('runtime = "docker"\n', r"x.toml:1: runtime: 'docker' is not one of"),
        ('runtime = "pyxis"\nextra_sbatch = ["--x\\n#SBATCH --y"]\n', r"extra_sbatch: .* must be one long option"),
        ('runtime = "pyxis"\n[env]\n"A B" = "x"\n', r"env: 'A B' is not a valid"),
        ('runtime = "pyxis"\nnodes = ?\ntime = "1:00"\n', r"x.toml: invalid TOML: .*line 2"),
        ('nodes = 2\n', r"missing key 'runtime'"),
        ('runtime = "pyxis"\n\n\nnodez = 2\n', r"x.toml:4: unknown key 'nodez'"),
        ('# a comment\n\nruntime = "pyxis"\n# nodes = 3 was here\n\nnodes = "3"\n', r"x.toml:6: key 'nodes' must be int"),
        ('runtime = "pyxis"\n\n[envv]\nA = "1"\n', r"x.toml:3: unknown key 'envv'"),
        ('runtime = "pyxis"\n\n\n"qos" = "a b"\n', r"x.toml:4: qos: 'a b' may only contain"),
    ],
)
def test_bad_site_files_name_file_line_and_key(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_site(write_site(tmp_path, "x", text))


def install_fakes(directory: Path) -> Path:
    directory.mkdir()
    for name, tail in (("srun", SRUN_TAIL), ("apptainer", ""), ("ch-run", ""), ("scontrol", ""), ("module", "")):
        path = directory / name
        path.write_text(FAKE.format(name=name, tail=tail))
        path.chmod(0o755)
    entry = directory / "fake-entrypoint"
    entry.write_text(FAKE.format(name="entrypoint", tail=""))
    entry.chmod(0o755)
    return directory


def run_script(script: Path, tmp_path: Path, env: dict, *args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    log = tmp_path / "fake.log"
    fakes = tmp_path / "fake_bin"
    if not fakes.exists():
        install_fakes(fakes)
    full = {"PATH": f"{fakes}:/usr/bin:/bin", "FAKE_LOG": str(log), "SLURM_ARRAY_TASK_ID": "2",
            "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_JOB_ID": "9", "SLURM_NODEID": "0", **env}
    result = subprocess.run(["bash", str(script), *args], env=full, capture_output=True, text=True, timeout=30)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


def hostile_site(tmp_path: Path, runtime: str, marker: Path) -> Path:
    evil = HOSTILE.format(marker=marker)
    toml_string = json.dumps(evil)  # a valid TOML basic string with the same escapes
    text = (
        f'runtime = "{runtime}"\nimage = {toml_string}\nmounts = [{json.dumps("/" + evil)}]\n'
        f"modules = [{toml_string}]\ninstall_dir = {json.dumps('/' + evil)}\nvenv = {toml_string}\n"
        f"[env]\nSITE_VALUE = {toml_string}\n"
    )
    path = write_site(tmp_path / "sites", f"evil-{runtime}", text)
    site = load_site(path)
    script = path.with_suffix(".sbatch")
    script.write_text(render_site(site, path.parent / "templates", job_script_facts()))
    return script


@pytest.mark.parametrize("runtime", ["pyxis", "apptainer", "charliecloud", "baremetal"])
def test_hostile_values_execute_nothing_and_pass_through_intact(tmp_path, runtime):
    marker = tmp_path / "INJECTED"
    script = hostile_site(tmp_path, runtime, marker)
    evil_dir = tmp_path / "out $(touch INJECTED) `touch INJECTED`; x"
    env = {"INPUT_DIR": str(tmp_path / "in"), "OUTPUT_DIR": str(evil_dir), "FAKE_SRUN_NO_EXEC": "1"}
    result, calls = run_script(script, tmp_path, env, "--drop-empty", "$(touch INJECTED)")
    assert not marker.exists() and not (Path.cwd() / "INJECTED").exists(), "a value was executed"
    assert result.returncode == 0, result.stderr
    srun = next(c for c in calls if c["tool"] == "srun")
    evil = HOSTILE.format(marker=marker)
    assert srun["argv"][-2:] == ["--drop-empty", "$(touch INJECTED)"]
    assert srun["env"]["SITE_VALUE"] == evil
    assert srun["env"]["OUTPUT_DIR"] == str(evil_dir) and evil_dir.is_dir()
    joined = "\n".join(srun["argv"])
    if runtime in ("pyxis", "apptainer", "charliecloud"):
        assert evil in joined or f"/{evil}" in joined, "the image or mount value must arrive unchanged"
    if runtime == "baremetal":
        assert srun["argv"][-3] == f"/{evil}/entrypoints/curator-array-entrypoint"
        assert srun["env"]["CURATOR_ARRAY_PYTHON"] == f"{evil}/bin/python"


def test_missing_variables_get_clear_messages(tmp_path):
    script = SITES / "example-pyxis.sbatch"
    result, _ = run_script(script, tmp_path, {})
    assert result.returncode == 2 and "INPUT_DIR is not set" in result.stderr


def test_shard_variables_reach_the_entrypoint_unchanged_and_it_judges_them(tmp_path):
    """The script computes no shard; the real entrypoint (one resolver) refuses bad values."""
    path = write_site(tmp_path / "sites", "bare", f'runtime = "baremetal"\ninstall_dir = "{REPO}"\n'
                      f'venv = "{REPO / ".venv"}"\n')
    script = path.with_suffix(".sbatch")
    script.write_text(render_site(load_site(path), path.parent / "templates", job_script_facts()))
    env = {"INPUT_DIR": str(tmp_path), "OUTPUT_DIR": str(tmp_path / "o"), "TOTAL_SHARDS": "x", "SHARD_INDEX_OFFSET": "3"}
    result, calls = run_script(script, tmp_path, env)
    srun_env = next(c for c in calls if c["tool"] == "srun")["env"]
    assert (srun_env["TOTAL_SHARDS"], srun_env["SHARD_INDEX_OFFSET"]) == ("x", "3")
    assert "MINIMUM_SHARD_INDEX" not in srun_env, "the script must not invent a default the entrypoint would trust"
    assert result.returncode == 2 and "TOTAL_SHARDS='x' is not an integer" in result.stderr, result.stderr
    local = SITES / "local.sbatch"
    result, _ = run_script(local, tmp_path, {"INPUT_DIR": "/a", "OUTPUT_DIR": str(tmp_path / "o")})
    assert result.returncode == 2 and "CONTAINER_IMAGE is not set" in result.stderr


def test_pyxis_flags_fake_srun_because_pyxis_is_not_runnable_here(tmp_path):
    env = {"INPUT_DIR": "/data/in", "OUTPUT_DIR": str(tmp_path / "out"), "CONTAINER_IMAGE": "images/ca.sqsh",
           "CONTAINER_MOUNTS": "/extra:/extra:ro", "FAKE_SRUN_NO_EXEC": "1", "SHARD_INDEX_OFFSET": "4", "TOTAL_SHARDS": "8"}
    result, calls = run_script(SITES / "example-pyxis.sbatch", tmp_path, env, "--min-words", "5")
    assert result.returncode == 0, result.stderr
    argv = next(c for c in calls if c["tool"] == "srun")["argv"]
    out = str(tmp_path / "out")
    assert argv[:1] == ["--ntasks-per-node=1"]
    assert "--container-image=./images/ca.sqsh" in argv
    assert f"--container-mounts=/data/in:/data/in:ro,{out}:{out},{out}:{out},/lustre/shared:/lustre/shared,/extra:/extra:ro" in argv
    assert "--no-container-mount-home" in argv and "--container-workdir=/tmp" in argv
    env_flag = next(a for a in argv if a.startswith("--container-env="))
    assert set(env_flag.split("=", 1)[1].split(",")) >= {"INPUT_DIR", "OUTPUT_DIR", "CHECKPOINT_PATH", "TOTAL_SHARDS",
                                                         "SHARD_INDEX_OFFSET", "MINIMUM_SHARD_INDEX", "TMPDIR"}
    assert argv[-3:] == ["/opt/curator-array/entrypoints/curator-array-entrypoint", "--min-words", "5"]
    srun_env = next(c for c in calls if c["tool"] == "srun")["env"]
    assert (srun_env["SHARD_INDEX_OFFSET"], srun_env["TOTAL_SHARDS"]) == ("4", "8")


def test_apptainer_flags_fake_apptainer_because_apptainer_is_not_runnable_here(tmp_path):
    sites = tmp_path / "sites"
    path = write_site(sites, "gpu-apptainer", (SITES / "example-apptainer.toml").read_text() + "gpus = 2\n")
    script = path.with_suffix(".sbatch")
    script.write_text(render_site(load_site(path), sites / "templates", job_script_facts()))
    env = {"INPUT_DIR": "/data/in", "OUTPUT_DIR": str(tmp_path / "out"), "SLURM_PROCID": "0", "SLURMD_NODENAME": "n7"}
    result, calls = run_script(script, tmp_path, env, "--dedup")
    assert result.returncode == 0, result.stderr
    call = next(c for c in calls if c["tool"] == "apptainer")
    argv = call["argv"]
    out = str(tmp_path / "out")
    assert argv[:3] == ["exec", "--cleanenv", "--nv"]
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"]
    assert binds == ["/data/in:/data/in:ro", f"{out}:{out}", f"{out}:{out}", "/shared:/shared", "/scratch:/scratch"]
    assert argv[-3:] == ["/shared/images/curator-array.sif", "/opt/curator-array/entrypoints/curator-array-entrypoint", "--dedup"]
    passed = {k[len("APPTAINERENV_"):]: v for k, v in call["env"].items() if k.startswith("APPTAINERENV_")}
    assert passed["INPUT_DIR"] == "/data/in" and passed["CHECKPOINT_PATH"] == out
    assert passed["SLURM_ARRAY_TASK_ID"] == "2" and passed["SLURMD_NODENAME"] == "n7"


def test_render_site_command_and_check(tmp_path, capsys):
    from curator_array.cli import main

    sites = tmp_path / "sites"
    write_site(sites, "mine", 'runtime = "charliecloud"\npartition = "debug"\n')
    assert main(["render-site", "--sites-dir", str(sites), "mine"]) == 0
    assert (sites / "mine.sbatch").exists()
    assert main(["render-site", "--sites-dir", str(sites), "--all", "--check"]) == 0
    (sites / "mine.toml").write_text('runtime = "charliecloud"\npartition = "other"\n')
    assert main(["render-site", "--sites-dir", str(sites), "--all", "--check"]) == 1
    assert "stale rendered site scripts: mine" in capsys.readouterr().err


# What pyxis documents for srun (its wiki's Usage page): each option's name, and the shape of its
# value (None: a switch). The pyxis scripts are checked against it where pyxis is not installed.
PYXIS_OPTIONS = {
    "--container-image": r"(/|\./)\S+|([\w.-]+@)?([\w.:-]+#)?[\w./-]+(:[\w.-]+)?",
    "--container-mounts": r"/[^,:]+:/[^,:]+(:[a-z]+(\+[a-z]+)*)?(,/[^,:]+:/[^,:]+(:[a-z]+(\+[a-z]+)*)?)*",
    "--container-workdir": r"/\S*",
    "--container-name": r"[\w.-]+",
    "--container-save": r"/\S+",
    "--container-env": r"[A-Za-z_][A-Za-z0-9_]*(,[A-Za-z_][A-Za-z0-9_]*)*",
    **{f"--{no}container-{switch}": None for no in ("", "no-")
       for switch in ("mount-home", "remap-root", "entrypoint")},
    "--container-writable": None,
    "--container-readonly": None,
}
PYXIS_MOUNT_FLAGS = {"ro", "rw", "private", "rprivate", "slave", "rslave", "shared", "rshared", "bind", "rbind",
                     "nosuid", "nodev", "noexec"}


@pytest.mark.parametrize("name", [n for n in site_names(SITES) if load_site(SITES / f"{n}.toml").runtime == "pyxis"])
@pytest.mark.parametrize("image,mounts", [("/images/ca.sqsh", ""), ("images/ca.sqsh", "/extra:/extra:ro,/b:/c")])
def test_every_pyxis_srun_line_uses_only_what_pyxis_documents(tmp_path, name, image, mounts):
    import re

    env = {"INPUT_DIR": "/data/in", "OUTPUT_DIR": str(tmp_path / "out"), "CONTAINER_IMAGE": image,
           "CONTAINER_MOUNTS": mounts, "FAKE_SRUN_NO_EXEC": "1"}
    result, calls = run_script(SITES / f"{name}.sbatch", tmp_path, env)
    assert result.returncode == 0, result.stderr
    [srun] = [c["argv"] for c in calls if c["tool"] == "srun"]
    options = [a for a in srun[:srun.index("/opt/curator-array/entrypoints/curator-array-entrypoint")]]
    pyxis = [a for a in options if a.startswith(("--container", "--no-container"))]
    assert pyxis and set(options) - set(pyxis) == {"--ntasks-per-node=1"}
    for option in pyxis:
        flag, _, value = option.partition("=")
        assert flag in PYXIS_OPTIONS, f"{flag} is not a pyxis option"
        shape = PYXIS_OPTIONS[flag]
        assert (shape is None) == (value == ""), option
        assert shape is None or re.fullmatch(shape, value), f"{option} is not of the shape pyxis documents"
        if flag == "--container-mounts":
            flags = {f for item in value.split(",") for f in item.split(":")[2:3] for f in f.split("+")}
            assert flags <= PYXIS_MOUNT_FLAGS, flags


OCI_SRUN_TAIL = """import shutil
bundle = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--container="))
shutil.copyfile(os.path.join(bundle, "config.json"), os.environ["FAKE_BUNDLE_COPY"])
"""


def test_the_oci_script_writes_its_jobs_bundle_and_keeps_the_batch_tasks_variables_out(tmp_path):
    """The bundle as the job's containers get it (copied by a fake srun: runc runs it for real in
    tests/container/test_oci.py), every value passed intact, and nothing left when the job ends."""
    image = tmp_path / "image"
    (image / "rootfs" / "usr").mkdir(parents=True)
    (image / "config.json").write_text(json.dumps({"process": {}, "mounts": [], "linux": {"namespaces": []}}))
    fakes = install_fakes(tmp_path / "fake_bin")
    (fakes / "srun").write_text(FAKE.format(name="srun", tail=OCI_SRUN_TAIL))
    marker = tmp_path / "INJECTED"
    data, extra, shared = tmp_path / "in", tmp_path / "extra $(touch INJECTED)", tmp_path / "shared"
    for directory in (data, extra, shared):
        directory.mkdir()
    site = write_site(tmp_path / "sites", "oci", (SITES / "example-oci.toml").read_text().replace(
        '"/shared:/shared", "/scratch:/scratch"', json.dumps(f"{shared}:/shared")))
    script = site.with_suffix(".sbatch")
    script.write_text(render_site(load_site(site), site.parent / "templates", job_script_facts()))
    out = tmp_path / "out `touch INJECTED`"
    copy = tmp_path / "bundle.json"
    env = {"INPUT_DIR": str(data), "OUTPUT_DIR": str(out), "CONTAINER_IMAGE": str(image),
           "CONTAINER_MOUNTS": f"{extra}:/extra:ro", "FAKE_BUNDLE_COPY": str(copy), "SLURMD_NODENAME": "n1",
           "SLURM_PROCID": "0"}
    result, calls = run_script(script, tmp_path, env, "--min-words", "5")
    assert result.returncode == 0, result.stderr
    assert not marker.exists() and not (Path.cwd() / "INJECTED").exists(), "a value was executed"
    [srun] = [c for c in calls if c["tool"] == "srun"]
    job_bundle = out / ".nemo_curator_metadata" / ".oci_bundles" / "job_9_restart_0"
    assert srun["argv"] == ["--ntasks-per-node=1", f"--container={job_bundle}",
                            "/opt/curator-array/entrypoints/curator-array-entrypoint", "--min-words", "5"]
    assert not {"SLURM_NODEID", "SLURM_PROCID", "SLURMD_NODENAME"} & set(srun["env"]), "node 0's own would reach all"
    assert srun["env"]["SLURM_ARRAY_TASK_ID"] == "2" and srun["env"]["OUTPUT_DIR"] == str(out)
    mounts = {m["destination"]: (m["source"], m["options"][-1]) for m in json.loads(copy.read_text())["mounts"]}
    assert mounts[str(data)] == (str(data), "ro") and mounts[str(out)] == (str(out), "rw")
    assert mounts["/extra"] == (str(extra), "ro") and mounts["/shared"] == (str(shared), "rw")
    assert not job_bundle.exists(), "the job's bundle is removed when the job ends"
