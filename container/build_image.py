#!/usr/bin/env python3
"""Build the curator-array image and convert it for HPC runtimes (the Makefile's backend).

    build_image.py base   [--tag T]          Debian base from packages (mmdebstrap + import)
    build_image.py image  [--base-image B]   the image, from container/Dockerfile; without B it uses
                                             python:3.11-slim if it can be pulled, else the Debian
                                             base (built first when missing): no registry needed
    build_image.py sqsh   [--output F]       enroot/pyxis squashfs (also runs with Charliecloud)
    build_image.py oci    [--output D]       OCI bundle for SLURM's own `srun --container`
    build_image.py sif    [--output F]       Apptainer image (or the exact command to run)

Talks to the daemon in DOCKER_HOST with the `docker` package (build time only; nothing of
this is in the image). Builds behind proxies: pip index settings (PIP_INDEX_URL,
PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST) are forwarded, and an extra CA bundle
(CURATOR_ARRAY_BUILD_CA, default the host's system bundle) is given to pip in the build.
A daemon without a bridge network builds with host networking.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO / "build"
DEFAULT_TAG = "curator-array:latest"
DEFAULT_BASE_TAG = "curator-array-base:bookworm"
REGISTRY_BASE = "python:3.11-slim"  # the Dockerfile's default base
SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")
SQSH_FORMAT = "v3"  # bump when the conversion changes, so old .sqsh files are rebuilt
OCI_FORMAT = "v2"  # bump when the conversion changes, so old bundles are rebuilt
# lz4 by default: pyxis with use_squashfuse=1 decompresses in userspace at every file read,
# and with zstd an element spent 4 s (8 s with four at once) importing Python where lz4 takes
# 2.7 s (5.7 s); the image is 35% larger (437 MiB against 324). SQSH_COMPRESSION=zstd for size.
COMPRESSION = {"lz4": ["-comp", "lz4"], "zstd": ["-comp", "zstd", "-Xcompression-level", "3"],
               "none": ["-noI", "-noD", "-noF", "-noX"]}
MOUNT_POINTS = ("scratch", "lustre", "gpfs", "shared", "data", "work", "checkpoint")


def ensure_daemon() -> None:
    """Use DOCKER_HOST or the default socket; else (root) start the throwaway daemon."""
    if os.environ.get("DOCKER_HOST") or Path("/var/run/docker.sock").exists():
        return
    if os.geteuid() == 0:
        started = subprocess.run([sys.executable, str(REPO / "scripts" / "dockerd.py"), "start"],
                                 capture_output=True, text=True)
        if started.returncode == 0:
            os.environ["DOCKER_HOST"] = started.stdout.strip().split("=", 1)[1]
            print(f"using the throwaway Docker daemon at {os.environ['DOCKER_HOST']}", file=sys.stderr)


def docker_client():
    try:
        import docker
    except ImportError:
        sys.exit("the 'docker' Python package is missing: pip install 'curator-array[build]'")
    ensure_daemon()
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - one clear line instead of a docker-py traceback
        sys.exit(f"no Docker daemon at {os.environ.get('DOCKER_HOST', 'the default socket')} ({exc}); "
                 "start one with: eval \"$(scripts/dockerd.py start)\"")
    return client


def version() -> str:
    for line in (REPO / "pyproject.toml").read_text().splitlines():
        if line.startswith("version"):
            return line.split("=", 1)[1].strip().strip('"')
    return "0.0.0"


def git_commit() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def ensure_tools(packages: dict[str, str]) -> None:
    """Each tool on PATH, else its Debian package installed (as root), else one line saying which."""
    missing = {tool: package for tool, package in packages.items() if not shutil.which(tool)}
    if not missing:
        return
    install = sorted(set(missing.values()))
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        sys.exit(f"{', '.join(missing)} missing: apt-get install -y {' '.join(install)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-qq", *install], check=True, env=env, stdout=subprocess.DEVNULL)


# libatomic1: mimalloc needs it (the tokenize encoder, the extraction children); slim images lack it.
BASE_RECIPE = ("--variant=minbase", "--quiet", "--include=python3,python3-venv,ca-certificates,libatomic1", "bookworm")
BASE_RECIPE_LABEL = "org.curator-array.base-recipe"


def base_recipe_digest() -> str:
    """Names the recipe a base was built from (its label), so a cached base shows whether it is this one's."""
    return hashlib.sha256(json.dumps(BASE_RECIPE).encode()).hexdigest()[:16]


def build_base(tag: str) -> str:
    """A Debian bookworm base with python3 and venv, from packages: no registry needed."""
    ensure_tools({"mmdebstrap": "mmdebstrap"})
    client = docker_client()
    with tempfile.TemporaryDirectory() as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        subprocess.run(["mmdebstrap", *BASE_RECIPE, str(rootfs)], check=True)
        repository, _, name = tag.partition(":")
        with open(rootfs, "rb") as data:
            client.api.import_image_from_data(data, repository=repository, tag=name or "latest",
                                              changes=["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                                       f"LABEL {BASE_RECIPE_LABEL}={base_recipe_digest()}"])
    print(f"built base image {tag}")
    return tag


def stage_ca_bundle() -> None:
    """Put the extra CA bundle into the build context (an empty file means none)."""
    source = os.environ.get("CURATOR_ARRAY_BUILD_CA")
    path = Path(source) if source else SYSTEM_CA
    target = REPO / "container" / "build-ca.pem"
    target.write_bytes(path.read_bytes() if source != "" and path.is_file() else b"")


def choose_base(client, requested: str | None) -> str:
    """The base to build on: the one asked for; else the registry's Python image when it can be
    had; else the offline Debian base, built from packages if it is not there yet or was
    built from another recipe (its label)."""
    import docker

    if requested:
        return requested
    for tag in (REGISTRY_BASE, DEFAULT_BASE_TAG):
        try:
            cached = client.images.get(tag)
        except docker.errors.ImageNotFound:
            continue
        if tag == REGISTRY_BASE or cached.labels.get(BASE_RECIPE_LABEL) == base_recipe_digest():
            return tag
        print(f"the cached {tag} was built from an older recipe: not used", flush=True)
    repository, _, version = REGISTRY_BASE.partition(":")
    try:
        client.images.pull(repository, tag=version)
        return REGISTRY_BASE
    except docker.errors.APIError as exc:
        reason = str(exc.explanation or exc).splitlines()[0][:160]
        print(f"cannot pull {REGISTRY_BASE} ({reason}); building the offline Debian base {DEFAULT_BASE_TAG} "
              "from packages instead", flush=True)
    return build_base(DEFAULT_BASE_TAG)


def build_image(tag: str, base_image: str | None) -> str:
    client = docker_client()
    base_image = choose_base(client, base_image)
    stage_ca_bundle()
    args = {"VERSION": version(), "GIT_COMMIT": git_commit(), "BASE_IMAGE": base_image}
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
        if os.environ.get(name):
            args[name] = os.environ[name]
    has_bridge = any(n.name == "bridge" for n in client.networks.list())
    network = os.environ.get("CURATOR_ARRAY_BUILD_NETWORK") or (None if has_bridge else "host")
    print(f"building {tag} (base {base_image}, network {network or 'bridge'})", flush=True)
    previous = _image_id(client, tag)
    image_id = None
    for chunk in client.api.build(path=str(REPO), dockerfile="container/Dockerfile", tag=tag, buildargs=args,
                                  network_mode=network, rm=True, forcerm=True, decode=True,
                                  nocache=bool(os.environ.get("CURATOR_ARRAY_NO_CACHE"))):
        if "stream" in chunk:
            sys.stdout.write(chunk["stream"])
        if "error" in chunk:
            sys.exit(f"image build failed: {chunk['error'].strip()}")
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
    image = client.images.get(tag)
    print(f"built {tag} {image.short_id} ({image.attrs['Size'] / 2**20:.0f} MiB)")
    if previous and previous != image.id:
        _remove_if_untagged(client, previous)
    return image_id or image.id


def _image_id(client, tag: str) -> str | None:
    import docker.errors

    try:
        return client.images.get(tag).id
    except docker.errors.ImageNotFound:
        return None


def _remove_if_untagged(client, image_id: str) -> None:
    """The image this tag named before the build: left untagged it would keep its own copy of
    the source layer on the daemon's disk at every rebuild. Kept while a container or another
    tag uses it (the daemon refuses without force, and we never force)."""
    import docker.errors

    try:
        if not client.images.get(image_id).tags:
            client.images.remove(image_id)
            print(f"removed the image {short_id(image_id)} this tag named before")
    except docker.errors.APIError as exc:
        print(f"kept the earlier image {short_id(image_id)}: {str(exc.explanation or exc)[:120]}")


def short_id(image_id: str) -> str:
    """The 12 hex digits Docker shows for an image ("sha256:..." stripped)."""
    return image_id.split(":", 1)[-1][:12]


def _rc_script(config: dict) -> str:
    command = (config.get("Entrypoint") or []) + (config.get("Cmd") or [])
    default = " ".join(shlex.quote(part) for part in command) or "/bin/sh"
    workdir = shlex.quote(config.get("WorkingDir") or "/")
    return (
        "# enroot start script, written by curator-array from the image's configuration.\n"
        "# Arguments given to `enroot start` (or pyxis without --container-entrypoint) run as is;\n"
        "# without arguments the image's entrypoint and command run.\n"
        f"cd {workdir} 2>/dev/null || cd /\n"
        'if [ $# -gt 0 ]; then\n    exec "$@"\nfi\n'
        f"exec {default}\n"
    )


def drop_device_nodes(rootfs: Path) -> None:
    """A flattened image carries /dev/null and friends as device nodes. enroot and pyxis mount
    their own /dev, and a non-root user cannot unpack device nodes (enroot create fails)."""
    for path in (rootfs / "dev").rglob("*"):
        if path.is_char_device() or path.is_block_device():
            path.unlink()


def _write_new(path: Path, text: str) -> None:
    """A new file at ``path``: the tree may share its files with an OCI bundle (hard links)."""
    path.unlink(missing_ok=True)
    path.write_text(text)


def write_enroot_files(rootfs: Path, config: dict) -> None:
    drop_device_nodes(rootfs)
    etc = rootfs / "etc"
    etc.mkdir(exist_ok=True)
    _write_new(etc / "rc", _rc_script(config))
    environment = "".join(f"{item}\n" for item in config.get("Env") or [])
    _write_new(etc / "environment", environment)
    # Charliecloud reads the same KEY=VALUE lines from /ch/environment (`ch-run --set-env`).
    (rootfs / "ch").mkdir(exist_ok=True)
    _write_new(rootfs / "ch" / "environment", environment)
    _write_new(etc / "fstab",
        "# Mounts enroot applies when the container starts (fstab(5) with enroot's extensions).\n"
        "# Ray keeps its sockets and session files under TMPDIR: give it a private, writable /tmp.\n"
        "tmpfs /tmp tmpfs x-create=dir,rw,nosuid,nodev\n"
    )
    for name in MOUNT_POINTS:
        (rootfs / name).mkdir(exist_ok=True)


def build_sqsh(tag: str, output: Path | None) -> Path:
    client = docker_client()
    image = client.images.get(tag)
    short = short_id(image.id)
    target = output or BUILD_DIR / f"curator-array-{short}.sqsh"
    compression = os.environ.get("SQSH_COMPRESSION", "lz4")
    if compression not in COMPRESSION:
        sys.exit(f"SQSH_COMPRESSION={compression!r}: use one of {', '.join(COMPRESSION)}")
    stamp = target.with_suffix(target.suffix + ".image-id")
    if target.exists() and stamp.exists() and stamp.read_text().split() == [image.id, SQSH_FORMAT, compression]:
        print(f"{target} is already built from image {short}; reusing it")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if shutil.which("enroot"):
        subprocess.run(["enroot", "import", "--output", str(target), f"dockerd://{tag}"], check=True)
    else:
        if not shutil.which("mksquashfs"):
            sys.exit("mksquashfs is missing: apt-get install -y squashfs-tools")
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            rootfs = Path(tmp) / "rootfs"
            if not linked_bundle_rootfs(image.id, rootfs):
                export_rootfs(client, tag, rootfs)
            write_enroot_files(rootfs, image.attrs["Config"])
            partial = target.with_name(f".{target.name}.partial")
            subprocess.run(["mksquashfs", str(rootfs), str(partial), "-noappend", *COMPRESSION[compression],
                            "-quiet", "-no-progress"], check=True)
            os.replace(partial, target)
    stamp.write_text(f"{image.id} {SQSH_FORMAT} {compression}\n")
    print(f"wrote {target} ({target.stat().st_size / 2**20:.0f} MiB) from image {short}")
    if output is None:
        remove_older_sqsh(target)
    return target


def bundle_stamp(bundle: Path) -> Path:
    return bundle.with_name(bundle.name + ".image-id")


def bundle_is_of(bundle: Path, image_id: str) -> bool:
    """The OCI bundle is complete and built from this image by this conversion."""
    stamp = bundle_stamp(bundle)
    return (bundle / "config.json").exists() and stamp.exists() and stamp.read_text().split() == [image_id, OCI_FORMAT]


def linked_bundle_rootfs(image_id: str, rootfs: Path) -> bool:
    """``rootfs`` as hard links to the files of this image's OCI bundle in build/, when `make
    oci` made one: the same flattened export, without asking the daemon for it again (15 s
    of the .sqsh's 20 for this image). False where there is none, or it is on another disk."""
    bundle = BUILD_DIR / f"curator-array-{short_id(image_id)}.oci"
    if not bundle_is_of(bundle, image_id):
        return False
    linked = subprocess.run(["cp", "-al", str(bundle / "rootfs"), str(rootfs)], capture_output=True)
    if linked.returncode:
        shutil.rmtree(rootfs, ignore_errors=True)
        return False
    print(f"the .sqsh takes its files from {bundle}")
    return True


def export_rootfs(client, tag: str, rootfs: Path) -> None:
    """The image's files as one tree in ``rootfs``, flattened by the daemon (the export of a
    container created, never started, from it); owners kept as numbers."""
    rootfs.mkdir()
    container = client.containers.create(tag, entrypoint=["/bin/true"])
    try:
        untar = subprocess.Popen(["tar", "-x", "--numeric-owner", "-C", str(rootfs)], stdin=subprocess.PIPE)
        for chunk in container.export(chunk_size=1 << 20):
            untar.stdin.write(chunk)
        untar.stdin.close()
        if untar.wait():
            sys.exit("flattening the image failed (tar)")
    finally:
        container.remove(force=True)
    (rootfs / ".dockerenv").unlink(missing_ok=True)  # the export's marker, not the image's


def runtime_default_spec() -> dict:
    """The default ``config.json`` of the OCI runtime SLURM will start (``runc spec``, else
    ``crun spec``): namespaces, mounts and masked paths as that runtime expects them."""
    runtime = next((name for name in ("runc", "crun") if shutil.which(name)), None)
    if runtime is None:
        ensure_tools({"runc": "runc"})
        runtime = "runc"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([runtime, "spec"], cwd=tmp, check=True)
        return json.loads(Path(tmp, "config.json").read_text())


def _account(rootfs: Path, table: str, key: str) -> list[str] | None:
    """The ``/etc/passwd`` or ``/etc/group`` line of the image whose name or number is ``key``."""
    try:
        lines = (rootfs / "etc" / table).read_text().splitlines()
    except OSError:
        return None
    for fields in (line.split(":") for line in lines if line and not line.startswith("#")):
        if len(fields) > 3 and key in (fields[0], fields[2]):
            return fields
    return None


def image_user(user: str, rootfs: Path) -> tuple[int, int, str]:
    """The image's ``User`` ("name", "uid", "name:group", "uid:gid" or empty for root) as
    numbers and a home directory, looked up in the image's own account files."""
    name, _, group = (user or "0").partition(":")
    account = _account(rootfs, "passwd", name)
    if account is None and not name.isdigit():
        sys.exit(f"the image's user {name!r} is not in its /etc/passwd")
    uid = int(account[2]) if account else int(name)
    gid = int(account[3]) if account else 0
    if group:
        entry = _account(rootfs, "group", group)
        if entry is None and not group.isdigit():
            sys.exit(f"the image's group {group!r} is not in its /etc/group")
        gid = int(entry[2]) if entry else int(group)
    home = account[5] if account and len(account) > 5 and account[5] else "/"
    return uid, gid, home


def runtime_config(spec: dict, image_config: dict, rootfs: Path) -> dict:
    """The bundle's ``config.json``: the runtime's default with what the image says a container
    runs (the OCI image spec's conversion): its entrypoint and command, variables (the image's
    win over the default's), working directory, user and labels; no terminal, as in a batch job."""
    config = json.loads(json.dumps(spec))
    uid, gid, home = image_user(image_config.get("User") or "", rootfs)
    variables = dict(item.split("=", 1) for item in config["process"].get("env", []) if "=" in item)
    variables.update(item.split("=", 1) for item in image_config.get("Env") or [] if "=" in item)
    variables.setdefault("HOME", home)
    command = (image_config.get("Entrypoint") or []) + (image_config.get("Cmd") or [])
    config["process"].update(terminal=False, user={"uid": uid, "gid": gid}, cwd=image_config.get("WorkingDir") or "/",
                             env=[f"{key}={value}" for key, value in variables.items()], args=command or ["/bin/sh"])
    config["annotations"] = dict(image_config.get("Labels") or {})
    return config


def build_oci(tag: str, output: Path | None) -> Path:
    """An OCI bundle of the image (``rootfs/`` and ``config.json``) for SLURM's ``srun
    --container``: the daemon's flattened export unpacked, as for the .sqsh, and the runtime's
    default configuration with the image's applied. The bundle of the same image id is reused.
    A job script derives its own configuration from this one (curator_array/slurm/oci_bundle.py)."""
    client = docker_client()
    image = client.images.get(tag)
    short = short_id(image.id)
    target = output or BUILD_DIR / f"curator-array-{short}.oci"
    stamp = bundle_stamp(target)
    if bundle_is_of(target, image.id):
        print(f"{target} is already built from image {short}; reusing it")
        return target
    spec = runtime_default_spec()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        bundle = Path(tmp) / "bundle"
        bundle.mkdir()
        export_rootfs(client, tag, bundle / "rootfs")
        drop_device_nodes(bundle / "rootfs")
        config = runtime_config(spec, image.attrs["Config"], bundle / "rootfs")
        (bundle / "config.json").write_text(json.dumps(config, indent=1) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(bundle, target)
    stamp.write_text(f"{image.id} {OCI_FORMAT}\n")
    print(f"wrote {target} from image {short}")
    older = [p for p in BUILD_DIR.glob("curator-array-*.oci") if p != target]
    if output is None and older:
        print(f"older bundles in {BUILD_DIR}: {', '.join(p.name for p in older)}; remove them once no job runs them "
              "(a running container reads its bundle's files)", file=sys.stderr)
    return target


def remove_older_sqsh(keep: Path) -> None:
    """Earlier images' .sqsh files in build/ (a few hundred MiB each). A job still running
    one keeps its open or mounted file until it ends."""
    for old in BUILD_DIR.glob("curator-array-*.sqsh"):
        if old != keep:
            old.unlink(missing_ok=True)
            old.with_suffix(old.suffix + ".image-id").unlink(missing_ok=True)


def build_sif(tag: str, output: Path | None) -> int:
    target = output or BUILD_DIR / "curator-array.sif"
    apptainer = shutil.which("apptainer") or shutil.which("singularity")
    if apptainer:
        target.parent.mkdir(parents=True, exist_ok=True)
        return subprocess.run([apptainer, "build", "--force", str(target), f"docker-daemon://{tag}"]).returncode
    archive = BUILD_DIR / "curator-array-image.tar"
    archive.parent.mkdir(parents=True, exist_ok=True)
    client = docker_client()
    with open(archive, "wb") as handle:
        for chunk in client.images.get(tag).save(named=True):
            handle.write(chunk)
    print(
        "Apptainer is not installed here. Saved the image to\n"
        f"  {archive}\n"
        "Copy it to a machine with Apptainer and run:\n"
        f"  apptainer build curator-array.sif docker-archive:{archive.name}",
        file=sys.stderr,
    )
    return 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["base", "image", "sqsh", "oci", "sif", "inspect"])
    parser.add_argument("--tag", default=None)
    parser.add_argument("--base-image", default=os.environ.get("BASE_IMAGE") or None)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "base":
        build_base(args.tag or DEFAULT_BASE_TAG)
    elif args.command == "image":
        build_image(args.tag or DEFAULT_TAG, args.base_image)
    elif args.command == "sqsh":
        print(build_sqsh(args.tag or DEFAULT_TAG, args.output))  # last line: the path, for scripts
    elif args.command == "oci":
        print(build_oci(args.tag or DEFAULT_TAG, args.output))  # last line: the path, for scripts
    elif args.command == "sif":
        return build_sif(args.tag or DEFAULT_TAG, args.output)
    else:
        image = docker_client().images.get(args.tag or DEFAULT_TAG)
        print(json.dumps({"id": image.id, "size": image.attrs["Size"], "labels": image.labels}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
