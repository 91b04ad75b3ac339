"""The OCI bundle's config.json as `make oci` writes it (container/build_image.py): the runtime's
default with the image's process applied. The bundle runs for real under `srun --container`
in tests/container/test_oci.py."""

from __future__ import annotations

import pytest

from tests.support.build_tool import load_build_tool

build_image = load_build_tool()

DEFAULT = {"ociVersion": "1.0.2-dev", "hostname": "runc", "root": {"path": "rootfs", "readonly": True},
           "process": {"terminal": True, "user": {"uid": 0, "gid": 0}, "args": ["sh"], "cwd": "/",
                       "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm"]},
           "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
           "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}}


@pytest.fixture
def rootfs(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n"
                                             "curator:x:1500:1600:Curator:/home/curator:/bin/sh\n")
    (tmp_path / "etc" / "group").write_text("root:x:0:\nstaff:x:50:\ncurator:x:1600:\n")
    return tmp_path


def test_the_images_process_replaces_the_runtimes_and_its_variables_win(rootfs):
    image = {"Entrypoint": ["/opt/entry"], "Cmd": ["--help"], "WorkingDir": "/tmp",
             "Env": ["PATH=/opt/venv/bin:/usr/bin", "LANG=C.UTF-8"], "Labels": {"org.opencontainers.image.title": "x"}}
    config = build_image.runtime_config(DEFAULT, image, rootfs)
    assert config["process"]["args"] == ["/opt/entry", "--help"]
    assert config["process"]["cwd"] == "/tmp"
    assert config["process"]["env"] == ["PATH=/opt/venv/bin:/usr/bin", "TERM=xterm", "LANG=C.UTF-8", "HOME=/root"]
    assert config["process"]["terminal"] is False and config["process"]["user"] == {"uid": 0, "gid": 0}
    assert config["annotations"] == {"org.opencontainers.image.title": "x"}
    assert config["mounts"] == DEFAULT["mounts"] and config["linux"] == DEFAULT["linux"], "the runtime's own kept"
    assert DEFAULT["process"]["args"] == ["sh"], "the default is not changed in place"


def test_an_image_without_a_command_runs_a_shell_in_the_root(rootfs):
    config = build_image.runtime_config(DEFAULT, {"Env": ["HOME=/data"]}, rootfs)
    assert config["process"]["args"] == ["/bin/sh"] and config["process"]["cwd"] == "/"
    assert "HOME=/data" in config["process"]["env"], "the image's HOME is kept"


@pytest.mark.parametrize(("user", "expected"), [
    ("", (0, 0, "/root")),
    ("curator", (1500, 1600, "/home/curator")),
    ("1500", (1500, 1600, "/home/curator")),
    ("curator:staff", (1500, 50, "/home/curator")),
    ("2000:2001", (2000, 2001, "/")),
    ("1500:0", (1500, 0, "/home/curator")),
])
def test_the_images_user_is_looked_up_in_its_own_account_files(rootfs, user, expected):
    assert build_image.image_user(user, rootfs) == expected


@pytest.mark.parametrize(("user", "message"), [
    ("nobody-here", "the image's user 'nobody-here' is not in its /etc/passwd"),
    ("curator:wheel", "the image's group 'wheel' is not in its /etc/group"),
])
def test_a_user_the_image_does_not_know_stops_the_build_with_one_line(rootfs, user, message):
    with pytest.raises(SystemExit) as stopped:
        build_image.image_user(user, rootfs)
    assert str(stopped.value) == message
