"""The image on a real Docker daemon: any uid, read-only root, pinned versions, enroot files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, SAMPLE, read_records, records_digest

pytestmark = pytest.mark.container


def test_runs_as_any_uid_with_a_read_only_root(docker_client, image, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    logs = docker_client.containers.run(
        image,
        ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress", "--output-file-type", "parquet"],
        user="12345:12345", read_only=True, tmpfs={"/tmp": "rw,exec"}, network_mode="none", shm_size="512m",
        volumes={str(SAMPLE / "jsonl"): {"bind": "/data/in", "mode": "ro"}, str(out): {"bind": "/data/out", "mode": "rw"}},
        environment={"INPUT_DIR": "/data/in", "OUTPUT_DIR": "/data/out", "SLURM_JOB_ID": "41", "SLURM_ARRAY_JOB_ID": "40",
                     "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "1", "SLURM_JOB_NUM_NODES": "1"},
        remove=True, stdout=True, stderr=True,
    ).decode()
    manifest = json.loads((out / ".nemo_curator_metadata/.slurm_array_completion/completed_slurm_array_0.json").read_text())
    assert manifest["status"] == "completed" and manifest["slurm_job_id"] == "41", logs[-2000:]
    expected = [json.loads(line) for p in sorted((SAMPLE / "jsonl").glob("*.jsonl")) for line in p.read_text().splitlines()]
    import gzip

    expected += [json.loads(line) for line in gzip.open(SAMPLE / "jsonl" / "part-011.jsonl.gz", "rt").read().splitlines()]
    assert records_digest(read_records(out)) == records_digest(expected)


def test_installed_versions_equal_the_lock(docker_client, image):
    """The image, like the venv of `make install`, has the lock's versions (it leaves out the
    test tools and the report's matplotlib)."""
    frozen = docker_client.containers.run(image, ["freeze", "--exclude", "curator-array"], entrypoint=["pip"],
                                          remove=True, network_mode="none").decode()
    versions = lambda text: dict(line.lower().replace("_", "-").split("==") for line in text.splitlines()  # noqa: E731
                                 if "==" in line and not line.startswith("#"))
    image_versions, locked = versions(frozen), versions((REPO / "requirements.lock").read_text())
    assert image_versions and {name: locked.get(name) for name in image_versions} == image_versions
    assert {"ray", "pyarrow", "resiliparse", "tokenizers"} <= image_versions.keys()
    assert "pytest" not in image_versions and "matplotlib" not in image_versions


def test_fineweb_url_lists_are_in_the_image(docker_client, image):
    """Fetched from the package registry when the image was built; read without a network."""
    code = ("from curator_array.stages.web.url_lists import UrlLists; lists = UrlLists.load(); "
            "print(lists.source, len(lists.domains), len(lists.banned_words))")
    out = docker_client.containers.run(image, ["-c", code], entrypoint=["python"], remove=True,
                                       network_mode="none").decode().split()
    assert out[0] == "datatrove==0.10.1" and int(out[1]) > 4_000_000 and int(out[2]) > 100, out


HELPERS_IN_THE_IMAGE = """
import json
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from curator_array.stages.web.sandbox import ExtractionSandbox
from curator_array.tokens.encoder import EncoderProcess
tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tokenizer.train_from_iterator(["the tokens of a curated corpus"] * 20, trainers.BpeTrainer(
    vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tokenizer.save("/tmp/tokenizer.json")
with EncoderProcess("/tmp/tokenizer.json", None) as encoder:
    maps = open(f"/proc/{encoder.process.pid}/maps").read()
    lengths = encoder.lengths(["the tokens of a curated corpus"]).tolist()
sandbox = ExtractionSandbox("curator_array.stages.web.extract:fineweb_text", timeout_s=60)
outcome, text = sandbox.extract("<html><body><article><p>" + "A sentence about rivers. " * 30 + "</p></article>")
extractor_maps = open(f"/proc/{sandbox._process.pid}/maps").read()
sandbox.close()
print(json.dumps([lengths, "libmimalloc" in maps, "libatomic" in maps,
                  tokenizer.encode("the tokens of a curated corpus").ids, bool(text), "libmimalloc" in extractor_maps]))
"""


def test_the_tokenize_encoder_and_the_extraction_children_run_on_mimalloc_in_the_image(docker_client, image):
    """As any uid, read-only, no network: the wheel's mimalloc and its libatomic from the base."""
    out = docker_client.containers.run(image, ["-c", HELPERS_IN_THE_IMAGE], entrypoint=["python"], user="4321:4321",
                                       read_only=True, tmpfs={"/tmp": ""}, remove=True, network_mode="none")
    lengths, on_mimalloc, with_libatomic, ids, extracted, extractor_on_mimalloc = json.loads(out.decode())
    assert lengths == [len(ids)] and ids and on_mimalloc and with_libatomic, out.decode()
    assert extracted and extractor_on_mimalloc, out.decode()


def test_labels_and_size(docker_client, image):
    attrs = docker_client.images.get(image).attrs
    labels = attrs["Config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == "0.1.0"
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert labels["org.opencontainers.image.revision"].startswith(commit or "unknown")
    # Most of the last 250 MB are the word segmenters' dictionaries the quality filters need
    # (SudachiPy's core dictionary for Japanese, 193 MB; jieba's for Chinese, 42 MB).
    assert attrs["Size"] < 1.25 * 1024**3


def unsquash_cat(sqsh: Path, path: str) -> str:
    return subprocess.run(["unsquashfs", "-cat", str(sqsh), path], capture_output=True, text=True, check=True).stdout


def test_sqsh_has_enroot_files_and_is_reused(docker_client, image, sqsh, build_tool):
    env = docker_client.images.get(image).attrs["Config"]["Env"]
    assert unsquash_cat(sqsh, "/etc/environment").splitlines() == env
    assert unsquash_cat(sqsh, "/ch/environment").splitlines() == env
    rc = unsquash_cat(sqsh, "/etc/rc")
    assert 'exec "$@"' in rc and "exec /opt/curator-array/entrypoints/curator-array-entrypoint" in rc
    assert "tmpfs /tmp tmpfs x-create=dir" in unsquash_cat(sqsh, "/etc/fstab")
    listing = subprocess.run(["unsquashfs", "-l", str(sqsh)], capture_output=True, text=True, check=True).stdout
    for mount_point in ("/scratch", "/lustre", "/data", "/tmp", "/opt/curator-array/entrypoints/curator-array-entrypoint"):
        assert f"squashfs-root{mount_point}\n" in listing
    before = sqsh.stat().st_mtime_ns
    assert build_tool.build_sqsh(image, None) == sqsh and sqsh.stat().st_mtime_ns == before


def test_sif_without_apptainer_says_what_to_run(image, build_tool, capsys):
    if build_tool.shutil.which("apptainer") or build_tool.shutil.which("singularity"):
        pytest.skip("Apptainer is installed: `make sif` builds for real")
    assert build_tool.build_sif(image, None) == 3
    message = capsys.readouterr().err
    assert "apptainer build curator-array.sif docker-archive:curator-array-image.tar" in message
    assert (REPO / "build" / "curator-array-image.tar").stat().st_size > 100 * 2**20


def test_dockerfile_is_hadolint_clean():
    hadolint = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "hadolint"
    hadolint = hadolint if hadolint.exists() else REPO / ".venv" / "bin" / "hadolint"
    result = subprocess.run([str(hadolint), str(REPO / "container" / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_commoncrawl_pipeline_runs_inside_the_image(docker_client, image, tmp_path):
    """WARC → text → language → quality → Parquet, with the libraries of the image's lock."""
    import pyarrow.parquet as pq

    from tests.support.warcs import write_warc
    from tests.web_pages import pages

    warcs = tmp_path / "warcs"
    warcs.mkdir()
    expected = {}
    for index in range(2):
        records, outcome = pages(f"site{index}.example")
        write_warc(warcs / f"crawl-{index}.warc.gz", records)
        expected.update(outcome)
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    logs = docker_client.containers.run(
        image,
        ["--pipeline", "commoncrawl", "--input-file-type", "warc", "--languages", "en,de,ja",
         "--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"],
        user="12345:12345", read_only=True, tmpfs={"/tmp": "rw,exec"}, network_mode="none", shm_size="512m",
        volumes={str(warcs): {"bind": "/data/in", "mode": "ro"}, str(out): {"bind": "/data/out", "mode": "rw"}},
        environment={"INPUT_DIR": "/data/in", "OUTPUT_DIR": "/data/out"}, remove=True, stdout=True, stderr=True,
    ).decode()
    manifest = json.loads((out / ".nemo_curator_metadata/.slurm_array_completion/completed_slurm_array_0.json").read_text())
    assert manifest["status"] == "completed", logs[-2000:]
    rows = [r for path in sorted(out.glob("*.parquet")) for r in pq.read_table(path).to_pylist()]
    kept = {url: e["language"] for url, e in expected.items() if e["kept"]}
    assert {r["url"]: r["language"] for r in rows} == kept
    assert manifest["records_skipped"] == {"non_html_records": 2, "truncated_records": 2}
    assert manifest["rows_dropped_by_stage"]["language.not_kept"] == 2


def test_without_a_registry_the_build_makes_its_own_base(docker_client, build_tool, base_choice, monkeypatch, capsys):
    """No registry is reachable here: the pull fails for real and the Debian base is built.

    When this session's image build already had to build the base, that build is the one
    checked. A cached base built from today's recipe (its label says so) was built by this
    code when it was cached: it is checked as it is. Any other cached base (an older recipe)
    is built again under a throwaway tag."""
    import docker

    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(build_tool.REGISTRY_BASE)
    built_this_session = "building the offline Debian base" in base_choice.said
    cached = docker_client.images.get(base_choice.tag)
    if not built_this_session and cached.labels.get(build_tool.BASE_RECIPE_LABEL) == build_tool.base_recipe_digest():
        repository, _, version = build_tool.REGISTRY_BASE.partition(":")
        with pytest.raises(docker.errors.APIError):
            docker_client.images.pull(repository, tag=version)
        python = docker_client.containers.run(base_choice.tag, ["python3", "-c", "import venv, ssl; print('ok')"],
                                              remove=True, network_mode="none")
        assert python.decode().strip() == "ok"
        assert build_tool.choose_base(docker_client, "my/base:1") == "my/base:1", "BASE_IMAGE still overrides"
        return
    offline = base_choice.tag if built_this_session else "curator-array-base:offline-test"
    try:
        if built_this_session:
            said = base_choice.said.strip().splitlines()
        else:
            monkeypatch.setattr(build_tool, "DEFAULT_BASE_TAG", offline)
            assert build_tool.choose_base(docker_client, None) == offline
            said = capsys.readouterr().out.strip().splitlines()
        if built_this_session and said[0] == f"the cached {offline} was built from an older recipe: not used":
            said = said[1:]  # an older recipe's base is built again, never used
        assert said[0].startswith("cannot pull python:3.11-slim (") and "building the offline Debian base" in said[0]
        assert said[-1] == f"built base image {offline}"
        built = docker_client.images.get(offline)
        assert built.labels.get(build_tool.BASE_RECIPE_LABEL) == build_tool.base_recipe_digest()
        python = docker_client.containers.run(offline, ["python3", "-c", "import venv, ssl; print('ok')"],
                                              remove=True, network_mode="none")
        assert python.decode().strip() == "ok"
        assert build_tool.choose_base(docker_client, "my/base:1") == "my/base:1", "BASE_IMAGE still overrides"
    finally:
        if not built_this_session:
            docker_client.images.remove(offline, force=True)
        if cached.labels.get(build_tool.BASE_RECIPE_LABEL) != build_tool.base_recipe_digest():
            docker_client.images.remove(base_choice.tag, force=True)  # the next session builds today's recipe