"""The job's OCI bundle (curator_array/slurm/oci_bundle.py), written from a small image tree:
what the job's root shows of the image, its mounts in order, and the rootless settings.
The bundles run for real under `srun --container` in tests/container/test_oci.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from curator_array.slurm import oci_bundle
from curator_array.slurm.oci_bundle import BundleError, image_entries, parse_mounts, write_bundle


@pytest.fixture
def image(tmp_path) -> Path:
    """A bundle as `make oci` writes one, with a merged /usr, a /var holding data and the usual top."""
    root = tmp_path / "image" / "rootfs"
    for directory in ("usr/bin", "var/lib/apt", "var/tmp", "etc", "opt/curator-array", "tmp", "dev", "data"):
        (root / directory).mkdir(parents=True)
    (root / "bin").symlink_to("usr/bin")
    (root / "etc" / "hostname").write_text("image\n")
    (root / "README").write_text("a file at the top\n")
    (root / "var" / "lib" / "apt" / "state").write_text("x")
    config = {"process": {"args": ["/entry"], "env": ["PATH=/opt/venv/bin:/usr/bin"], "cwd": "/tmp",
                          "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]},
              "hostname": "runc",
              "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                         {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
                          "options": ["nosuid", "gid=5", "mode=0620"]},
                         {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["size=65536k"]},
                         {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["ro"]},
                         {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup"}],
              "linux": {"namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
                        "resources": {"devices": [{"allow": False, "access": "rwm"}]}}}
    (tmp_path / "image" / "config.json").write_text(json.dumps(config))
    return tmp_path / "image"


@pytest.mark.parametrize("spec,expected", [
    ("", []),
    ("/a", [("/a", "/a", False)]),
    ("/a:/b,/c:/d:ro", [("/a", "/b", False), ("/c", "/d", True)]),
    (" /a:/b:rw , ", [("/a", "/b", False)]),
])
def test_mount_lists_read_as_every_runtime_reads_them(spec, expected):
    assert parse_mounts(spec) == expected


@pytest.mark.parametrize("spec", ["a:/b", "/a:/b:rx", "/a:/b:ro:x"])
def test_a_bad_mount_names_itself(spec):
    with pytest.raises(BundleError, match="must be /host/path"):
        parse_mounts(spec)


def test_the_image_is_bound_whole_except_where_a_job_path_lies_inside_it(image):
    entries = image_entries(str(image / "rootfs"), ["/var/tmp/job/in", "/data", "/scratch/out"])
    assert entries == [
        ("bind", "README"),
        ("symlink", "bin", "usr/bin"),
        ("dir", "data"),  # a job path: rebuilt (it is empty), the job's mount goes on top
        ("dir", "dev"),
        ("bind", "etc"),
        ("bind", "opt"),
        ("dir", "tmp"),
        ("bind", "usr"),
        ("dir", "var"),  # holds a job path: rebuilt one level deeper
        ("bind", "var/lib"),
        ("dir", "var/tmp"),
    ]


def written(job: Path) -> dict:
    return json.loads((job / "config.json").read_text())


def test_a_root_job_gets_the_image_read_only_its_paths_and_the_hosts_shm_and_network(image, tmp_path):
    data, out = tmp_path / "in", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    job = tmp_path / "job"
    write_bundle(str(image), str(job), [(str(out), str(out), False), (str(data), str(data), True),
                                        (str(out), str(out), False)], uid=0, gid=0)
    config = written(job)
    assert config["root"] == {"path": "rootfs", "readonly": True}
    assert "hostname" not in config and "rlimits" not in config["process"]
    assert [n["type"] for n in config["linux"]["namespaces"]] == ["pid", "ipc", "mount"], "host network and hostname"
    mounts = {m["destination"]: m for m in config["mounts"]}
    assert mounts["/dev/shm"]["source"] == "/dev/shm" and mounts["/tmp"]["type"] == "tmpfs"
    assert mounts["/usr"]["source"] == str(image / "rootfs" / "usr") and "ro" in mounts["/usr"]["options"]
    assert mounts[str(data)]["options"] == ["rbind", "ro"] and mounts[str(out)]["options"] == ["rbind", "rw"]
    order = [m["destination"] for m in config["mounts"]]
    assert len(order) == len(set(order)), "each destination once"
    assert order.index("/tmp") < order.index(str(data)), "a job path under /tmp must land on the private /tmp"
    assert os.readlink(job / "rootfs" / "bin") == "usr/bin"
    assert (job / "rootfs" / "README").is_file() and not (job / "rootfs" / "README").stat().st_size, "a file's mount point"
    assert mounts["/README"]["source"] == str(image / "rootfs" / "README")
    assert not (image / "rootfs" / "var" / "tmp" / "job").exists(), "nothing is made in the image"


def test_another_user_gets_a_user_namespace_mapping_the_containers_root_to_them(image, tmp_path):
    job = tmp_path / "job"
    write_bundle(str(image), str(job), [], uid=1234, gid=567)
    config = written(job)
    linux = config["linux"]
    assert {"type": "user"} in linux["namespaces"]
    assert linux["uidMappings"] == [{"containerID": 0, "hostID": 1234, "size": 1}]
    assert linux["gidMappings"] == [{"containerID": 0, "hostID": 567, "size": 1}]
    assert "resources" not in linux and config["process"]["user"] == {"uid": 0, "gid": 0}
    mounts = {m["destination"]: m for m in config["mounts"]}
    assert mounts["/sys"]["source"] == "/sys" and "rbind" in mounts["/sys"]["options"], "sysfs needs its own netns"
    assert "/sys/fs/cgroup" not in mounts and "gid=5" not in mounts["/dev/pts"]["options"]


def test_what_cannot_be_mounted_is_refused_in_one_line(image, tmp_path):
    with pytest.raises(BundleError, match="is not an OCI bundle"):
        write_bundle(str(tmp_path), str(tmp_path / "job"), [])
    with pytest.raises(BundleError, match="cannot mount /nowhere/at/all: it does not exist"):
        write_bundle(str(image), str(tmp_path / "job"), [("/nowhere/at/all", "/x", False)])
    with pytest.raises(BundleError, match="other than / and /tmp"):
        write_bundle(str(image), str(tmp_path / "job"), [(str(tmp_path), "/tmp", False)])


def test_the_file_runs_alone_with_a_plain_python(image, tmp_path):
    """As the job script runs it: the file's text on stdin, no package on the path."""
    source = Path(oci_bundle.__file__).read_text()
    done = subprocess.run([sys.executable, "-I", "-", str(image), str(tmp_path / "job"), "--mounts",
                           f"{tmp_path}:/shared:ro", "--bind", str(image), "/image"], input=source, text=True,
                          capture_output=True, cwd="/")
    assert done.returncode == 0, done.stderr
    mounts = {m["destination"]: m for m in written(tmp_path / "job")["mounts"]}
    assert mounts["/shared"]["source"] == str(tmp_path) and "ro" in mounts["/shared"]["options"]
    failed = subprocess.run([sys.executable, "-I", "-", str(tmp_path), str(tmp_path / "job2")], input=source,
                            text=True, capture_output=True)
    assert failed.returncode == 2 and failed.stderr.startswith("curator-array: ") and failed.stderr.count("\n") == 1
