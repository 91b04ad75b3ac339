"""A job's OCI bundle for ``srun --container``: the image's root filesystem, shared and
read-only, seen through the job's own ``config.json`` with the job's mounts.

``srun --container=BUNDLE`` runs each task in ``BUNDLE/rootfs`` as ``BUNDLE/config.json``
describes, and has no flag for mounts: a job that needs its input and output inside must
bring its own ``config.json``. SLURM 22.05 runs ``BUNDLE/rootfs`` whatever ``root.path``
says, and runc refuses a root reached through a symlink, so a private config cannot point at
the shared tree. The job's bundle therefore gets a small ``rootfs/`` of its own: each
top-level entry of the image bind-mounted read-only (symlinks copied as symlinks), the job's
paths as bind mounts (after the private ``/tmp``, so a path under it works too), a private
``/tmp`` under the read-only root, and the host's ``/dev/shm``
(a runtime's default is 64 MiB, below Ray's 75 MiB object store minimum). Where a job path
lies inside one of the image's directories, that directory is rebuilt one level deeper
instead of being bound whole, so a mount point is made in the job's tree, never in the image.

The container keeps the host's network (Ray's nodes must reach each other) and hostname.
A user other than root gets a user namespace that maps the container's root to them: the
files the job writes are theirs.

The site script runs this file with the node's own ``python3`` (3.6 or later, standard
library only: it is carried in the script's text, not imported from an install)::

    python3 - IMAGE_BUNDLE JOB_BUNDLE [--bind SRC DST] [--bind-ro SRC DST] [--mounts LIST]

``LIST`` is what ``CONTAINER_MOUNTS`` holds for every runtime: ``SRC[:DST[:ro]]`` items,
comma-separated.
"""

import json
import os
import shutil
import sys

# Made by the runtime itself (or by this file's mounts) in the job's tree, never bound from the image.
RUNTIME_DIRS = ("dev", "proc", "sys", "tmp")
DROPPED_NAMESPACES = ("network", "uts")


class BundleError(Exception):
    pass


def parse_mounts(spec):
    """``SRC[:DST[:ro]],...`` as (source, destination, read_only) triples."""
    mounts = []
    for item in filter(None, (part.strip() for part in (spec or "").split(","))):
        parts = item.split(":")
        if len(parts) > 3 or (len(parts) == 3 and parts[2] not in ("ro", "rw")) or not parts[0].startswith("/"):
            raise BundleError("mount %r must be /host/path[:/container/path[:ro]]" % item)
        destination = parts[1] if len(parts) > 1 and parts[1] else parts[0]
        mounts.append((parts[0], destination, len(parts) == 3 and parts[2] == "ro"))
    return mounts


def _inside(path, directory):
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def image_entries(image_root, destinations, relative=""):
    """How the job's tree shows the image: ("dir", path), ("symlink", path, target) and
    ("bind", path) entries, parents before children, for paths relative to the root."""
    entries = []
    for name in sorted(os.listdir(os.path.join(image_root, relative) if relative else image_root)):
        path = relative + "/" + name if relative else name
        host = os.path.join(image_root, path)
        if not relative and name in RUNTIME_DIRS:
            entries.append(("dir", path))
        elif os.path.islink(host):
            entries.append(("symlink", path, os.readlink(host)))
        elif os.path.isdir(host):
            if any(_inside(d, "/" + path) for d in destinations):
                entries.append(("dir", path))
                entries.extend(image_entries(image_root, destinations, path))
            else:
                entries.append(("bind", path))
        elif os.path.isfile(host):
            entries.append(("bind", path))
    return entries


def _outer_first(mounts):
    """Each destination once (its first mount wins), a directory's mount before those inside it."""
    unique = {}
    for source, destination, read_only in mounts:
        unique.setdefault(os.path.normpath(destination), (source, os.path.normpath(destination), read_only))
    return sorted(unique.values(), key=lambda mount: mount[1].count("/"))


def _bind(source, destination, read_only):
    return {"destination": destination, "type": "bind", "source": source,
            "options": ["rbind", "ro" if read_only else "rw"]}


def _rootless(config, uid, gid):
    """What runc needs to run as a user: a user namespace mapping the container's root to
    them, /sys bound (sysfs needs a network namespace of its own), no device cgroup."""
    linux = config.setdefault("linux", {})
    linux["namespaces"].append({"type": "user"})
    linux["uidMappings"] = [{"containerID": 0, "hostID": uid, "size": 1}]
    linux["gidMappings"] = [{"containerID": 0, "hostID": gid, "size": 1}]
    linux.pop("resources", None)
    config["process"]["user"] = {"uid": 0, "gid": 0}
    mounts = []
    for mount in config["mounts"]:
        if mount["destination"] == "/sys":
            mount = {"destination": "/sys", "type": "bind", "source": "/sys",
                     "options": ["rbind", "nosuid", "noexec", "nodev", "ro"]}
        elif mount["destination"] == "/sys/fs/cgroup":
            continue
        elif mount.get("type") == "devpts":
            mount = dict(mount, options=[o for o in mount.get("options", []) if not o.startswith("gid=")])
        mounts.append(mount)
    config["mounts"] = mounts


def job_config(base, image_root, entries, job_mounts, uid, gid):
    """The job's ``config.json`` from the image's: the runtime's own mounts first (without
    its small /dev/shm and /tmp), then the image's entries read-only, then the job's paths."""
    config = json.loads(json.dumps(base))
    config.pop("hostname", None)
    config["root"] = {"path": "rootfs", "readonly": True}
    process = config.setdefault("process", {})
    process["terminal"] = False
    process.pop("rlimits", None)  # the image's 1024 open files are too few for Ray: keep the job's limits
    linux = config.setdefault("linux", {})
    linux["namespaces"] = [n for n in linux.get("namespaces", []) if n.get("type") not in DROPPED_NAMESPACES]
    mounts = [m for m in config.get("mounts", []) if m.get("destination") not in ("/dev/shm", "/tmp")]
    mounts.append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                   "options": ["nosuid", "nodev", "mode=1777"]})
    mounts.append(_bind("/dev/shm", "/dev/shm", read_only=False))
    mounts.extend(_bind(os.path.join(image_root, e[1]), "/" + e[1], read_only=True) for e in entries if e[0] == "bind")
    mounts.extend(_bind(source, destination, read_only) for source, destination, read_only in job_mounts)
    config["mounts"] = mounts
    if uid != 0:
        _rootless(config, uid, gid)
    return config


def write_bundle(image_bundle, job_bundle, job_mounts, uid=None, gid=None):
    """Write ``job_bundle`` (config.json and its small rootfs) for the image at ``image_bundle``."""
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    image_root = os.path.join(image_bundle, "rootfs")
    try:
        with open(os.path.join(image_bundle, "config.json")) as handle:
            base = json.load(handle)
    except (OSError, ValueError) as problem:
        raise BundleError("%s is not an OCI bundle (make oci writes one): %s" % (image_bundle, problem))
    if not os.path.isdir(image_root):
        raise BundleError("%s has no rootfs/ (make oci writes one)" % image_bundle)
    for source, destination, _ in job_mounts:
        if not destination.startswith("/") or os.path.normpath(destination) in ("/", "/tmp"):
            raise BundleError("cannot mount %s at %s: give an absolute path other than / and /tmp" %
                              (source, destination))
        if not os.path.exists(source):
            raise BundleError("cannot mount %s: it does not exist on %s" % (source, os.uname()[1]))
    job_mounts = _outer_first(job_mounts)
    entries = image_entries(image_root, [d for _, d, _ in job_mounts])
    shutil.rmtree(job_bundle, ignore_errors=True)
    rootfs = os.path.join(job_bundle, "rootfs")
    os.makedirs(rootfs)
    for entry in entries:
        path = os.path.join(rootfs, entry[1])
        if entry[0] == "symlink":
            os.symlink(entry[2], path)
        elif entry[0] == "dir" or os.path.isdir(os.path.join(image_root, entry[1])):
            os.mkdir(path)
        else:
            open(path, "w").close()
    config = job_config(base, image_root, entries, job_mounts, uid, gid)
    partial = os.path.join(job_bundle, ".config.json.partial")
    with open(partial, "w") as handle:
        json.dump(config, handle, indent=1)
    os.rename(partial, os.path.join(job_bundle, "config.json"))


def main(argv):
    if len(argv) < 2:
        raise BundleError("usage: IMAGE_BUNDLE JOB_BUNDLE [--bind SRC DST] [--bind-ro SRC DST] [--mounts LIST]")
    image_bundle, job_bundle, rest = argv[0], argv[1], list(argv[2:])
    mounts = []
    while rest:
        flag = rest.pop(0)
        if flag in ("--bind", "--bind-ro") and len(rest) >= 2:
            mounts.append((rest.pop(0), rest.pop(0), flag == "--bind-ro"))
        elif flag == "--mounts" and rest:
            mounts.extend(parse_mounts(rest.pop(0)))
        else:
            raise BundleError("unexpected argument %r" % flag)
    write_bundle(os.path.abspath(image_bundle), os.path.abspath(job_bundle), mounts)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BundleError as problem:
        sys.stderr.write("curator-array: %s\n" % problem)
        sys.exit(2)
