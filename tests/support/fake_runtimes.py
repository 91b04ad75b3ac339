"""Fake container runtimes and a fake SLURM submission, for what cannot run here.

Each fake reproduces what its real counterpart does to the environment a process inside
the container sees, then runs the command on the host; nothing else of the runtime is
imitated:

* ``apptainer exec --cleanenv``: the host environment is dropped; ``APPTAINERENV_X``
  arrives as ``X``; the image's variables (its PATH, ...) are set.
* ``srun --container-image`` (pyxis + enroot): the host environment passes; the image's
  variables win over it, except those named in ``--container-env``.
* ``srun --container`` (SLURM's OCI containers with ``CreateEnvFile``): the step's environment
  replaces the image's variables of the same names; the image's others stay.
* ``ch-run --set-env``: the host environment passes and the image's variables win.
* ``sbatch`` (only for tests that cannot use the throwaway cluster): runs the script of the
  first array element at once, with the variables SLURM sets (a job that depends on another
  only when ``FAKE_SBATCH_DEPENDENTS`` is not ``queue``); ``squeue`` finds nothing
  queued and ``scontrol show config`` names a ``MaxArraySize``.

A command under ``/opt/curator-array/`` (the image's install path) runs from
``FAKE_IMAGE_ROOT`` on the host, as if the image were that directory. Apptainer (no
Debian 12 package) and pyxis (in tests that do not use the real plugin) are the reason.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

IMAGE_PREFIX = "/opt/curator-array/"

# -IS: the standard library alone, without the venv's site set-up (a third of a fake's start).
_COMMON = r'''#!{python} -IS
import json, os, sys
IMAGE_ENV = json.loads({image_env!r})
IMAGE_PREFIX = {prefix!r}

def host_path(command):
    root = os.environ.get("FAKE_IMAGE_ROOT")
    if root and command.startswith(IMAGE_PREFIX):
        return os.path.join(root, command[len(IMAGE_PREFIX):])
    return command

def run_in_image(command, env):
    command = [host_path(command[0]), *command[1:]]
    os.execvpe(command[0], command, env)
'''

_APPTAINER = r'''
args = sys.argv[1:]
assert args and args[0] == "exec", args
args = args[1:]
cleanenv = False
while args and args[0].startswith("-"):
    flag = args.pop(0)
    if flag == "--cleanenv":
        cleanenv = True
    elif flag in ("--bind", "-B"):
        args.pop(0)
image, command = args[0], args[1:]
env = {} if cleanenv else {k: v for k, v in os.environ.items() if not k.startswith("APPTAINERENV_")}
env.update(IMAGE_ENV)
env.update({k[len("APPTAINERENV_"):]: v for k, v in os.environ.items()
            if k.startswith("APPTAINERENV_") and k != "APPTAINERENV_PATH"})
run_in_image(command, env)
'''

_SRUN = r'''
args = sys.argv[1:]
options = []
while args and args[0].startswith("-"):
    options.append(args.pop(0))
pyxis = {o.split("=", 1)[0]: o.split("=", 1)[1] if "=" in o else "" for o in options}
env = dict(os.environ)
if "--container-image" in pyxis:
    named = set(filter(None, pyxis.get("--container-env", "").split(",")))
    env.update({k: v for k, v in IMAGE_ENV.items() if k not in named or k not in os.environ})
if "--container" in pyxis:
    assert os.path.isfile(os.path.join(pyxis["--container"], "config.json")), pyxis["--container"]
    env = dict(IMAGE_ENV, **os.environ)
run_in_image(args, env)
'''

_CH_RUN = r'''
args = sys.argv[1:]
separator = args.index("--")
env = dict(os.environ)
if "--set-env" in args[:separator]:
    env.update(IMAGE_ENV)
run_in_image(args[separator + 1:], env)
'''

# sbatch, squeue and scontrol are in bash: a test's submit calls sbatch once per phase, and a
# Python fake took 57 ms of CPU a call (600 calls in test_option_paths).
_SBATCH = r'''#!/bin/bash
array=0 dependent=
while [[ $# -gt 0 && $1 == -* ]]; do
    case $1 in
        --array=*) array=${1#--array=} ;;
        --dependency=*) dependent=1 ;;
    esac
    shift
done
if [[ -n $dependent && ${FAKE_SBATCH_DEPENDENTS:-} == queue ]]; then
    echo 4100
    exit 0
fi
SLURM_JOB_ID=4100 SLURM_ARRAY_JOB_ID=4100 SLURM_ARRAY_TASK_ID=${array%%[%,:-]*} SLURM_ARRAY_TASK_COUNT=1 \
    SLURM_JOB_NUM_NODES=1 SLURM_NODEID=0 SLURMD_NODENAME=fake-node bash "$@" >&2 || exit $?
echo 4100
'''

_SQUEUE = "#!/bin/bash\nexit 0\n"
_SCONTROL = r'''#!/bin/bash
if [[ $1 == show && $2 == config ]]; then
    echo "MaxArraySize            = 1001"
fi
'''
SHELL_FAKES = {"sbatch": _SBATCH, "squeue": _SQUEUE, "scontrol": _SCONTROL}

PYTHON_FAKES = {"apptainer": _APPTAINER, "srun": _SRUN, "ch-run": _CH_RUN}


def install_fakes(directory: Path, names: list[str], image_env: dict[str, str]) -> Path:
    """Write the named fakes into ``directory`` (put it first on PATH); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = directory / name
        if name in SHELL_FAKES:
            path.write_text(SHELL_FAKES[name])
        else:
            path.write_text(_COMMON.format(python=sys.executable, image_env=json.dumps(image_env), prefix=IMAGE_PREFIX)
                            + PYTHON_FAKES[name])
        path.chmod(0o755)
    return directory


RECORDER = r'''#!{python} -IS
# Records what an element was given (its arguments and environment) instead of running it.
import json, os, sys
with open(os.environ.get("FAKE_RECORD") or {fallback!r}, "a") as record:
    record.write(json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ)}}) + "\n")
'''


def install_recording_image(root: Path, record: Path) -> Path:
    """An image root whose entrypoint records what it was given into ``record``."""
    entry = root / "entrypoints" / "curator-array-entrypoint"
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text(RECORDER.format(python=sys.executable, fallback=str(record)))
    entry.chmod(0o755)
    return root
