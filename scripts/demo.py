#!/usr/bin/env python3
"""The main job on the bundled sample data: a 4-element array, then `curator-array status`.

It takes the most realistic path this machine allows and says which one and why. Each
container path builds the image (`make image`, reused when cached), converts it and submits
with `curator-array submit --site local-<runtime>` to the throwaway SLURM cluster:

1. **pyxis**: the `.sqsh` (`make sqsh`) under pyxis/enroot, where a site installed them;
2. **oci**: the OCI bundle (`make oci`) under SLURM's own `srun --container` (runc);
3. **charliecloud**: the `.sqsh` under `ch-run`;
4. **slurm**: the same array through the entrypoint, without a container (bare metal);
5. **local**: four processes with the array variables SLURM would set.

`DEMO_MODE=pyxis|oci|charliecloud|slurm|local` forces a path. Run it twice: the second time
every shard is already complete.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DEMO = Path(os.environ.get("DEMO_DIR", REPO / "demo_output")).resolve()
INPUT = REPO / "sample_data" / "jsonl"
OUTPUT, CHECKPOINT, LOGS = DEMO / "output", DEMO / "checkpoint", DEMO / "logs"
RUN_OPTIONS = ["--output-file-type", "parquet", "--drop-empty", "--min-words", "5", "--dedup-within-task",
               "--num-cpus", "1", "--object-store-memory", str(200 * 2**20), "--no-progress"]
SHARDS = 4


class Unavailable(Exception):
    """This path cannot run here; the message says why."""


def run(*command: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, cwd=REPO, env=env, check=check)


def job_env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", INPUT_DIR=str(INPUT), OUTPUT_DIR=str(OUTPUT),
                CHECKPOINT_PATH=str(CHECKPOINT), **extra)


def start_cluster() -> tuple[dict[str, str], bool]:
    if not (shutil.which("slurmctld") or (os.geteuid() == 0 and shutil.which("apt-get"))):
        raise Unavailable("SLURM is not installed and cannot be (needs root and apt-get)")
    started = run(sys.executable, str(REPO / "scripts" / "slurm_cluster.py"), "start", "--nodes", "3",
                  "--max-array-size", "5", "--squashfuse", check=False)
    if started.returncode:
        raise Unavailable(f"the throwaway SLURM cluster did not start: {started.stderr.strip()[-300:]}")
    variables = dict(line[len("export "):].split("=", 1) for line in started.stdout.splitlines()
                     if line.startswith("export "))
    return variables, variables.get("CURATOR_ARRAY_PYXIS") == "1"


def wait_for(job_ids: list[str], env: dict[str, str]) -> None:
    while any(run("squeue", "-h", "-j", job, env=env, check=False).stdout.strip() for job in job_ids):
        time.sleep(1)


def report_elements(pattern: str) -> None:
    for log in sorted(LOGS.glob(pattern)):
        lines = [line for line in log.read_text(errors="replace").splitlines()
                 if " complete: " in line or "already complete" in line or "error:" in line]
        print(f"  {log.name}: {lines[-1].split(': ', 1)[-1] if lines else 'no result (see the log)'}")


def build(*steps: str) -> str:
    """Run `build_image.py` steps; the last one's last line (the path it wrote)."""
    began = time.monotonic()
    for step in steps:
        done = run(sys.executable, str(REPO / "container" / "build_image.py"), step, check=False)
        if done.returncode:
            raise Unavailable(f"`make {step}` failed: {(done.stderr or done.stdout).strip()[-300:]}")
    built = str((REPO / done.stdout.strip().splitlines()[-1]).resolve())
    print(f"  image and {Path(built).name} ready in {time.monotonic() - began:.1f}s")
    return built


def submit_to_site(site: str, image: str, variables: dict[str, str], **extra: str) -> str:
    env = job_env(SLURM_CONF=variables["SLURM_CONF"], CONTAINER_IMAGE=image, **extra)
    submitted = run(str(BIN / "curator-array"), "submit", "--site", site, "--total-shards", str(SHARDS),
                    "--", *RUN_OPTIONS, env=dict(env, SBATCH_OUTPUT=str(LOGS / "slurm_%A_%a.out")), check=False)
    if submitted.returncode:
        raise Unavailable(f"curator-array submit failed: {submitted.stderr.strip()[-300:]}")
    jobs = [line.split()[0] for line in submitted.stdout.splitlines()]
    print(f"  submitted {', '.join(jobs)}: curator-array submit --site {site} --total-shards {SHARDS} "
          f"(CONTAINER_IMAGE={image}); waiting")
    wait_for(jobs, env)
    for job in jobs:  # this run's elements only: earlier demos' logs stay in the same directory
        report_elements(f"slurm_{job}_*.out")
    return variables["SLURM_CONF"]


def need_image_builder() -> None:
    if os.geteuid() != 0 and not os.environ.get("DOCKER_HOST"):
        raise Unavailable("building the image needs a Docker daemon (root starts a throwaway one)")


def pyxis_path() -> str:
    need_image_builder()
    variables, pyxis = start_cluster()
    if not pyxis:
        raise Unavailable(cluster_script().missing_pyxis())
    return submit_to_site("local-pyxis", build("image", "sqsh"), variables)


def oci_path() -> str:
    need_image_builder()
    variables, _ = start_cluster()
    if not shutil.which("runc"):
        raise Unavailable("runc is not installed (apt-get install runc)")
    return submit_to_site("local-oci", build("image", "oci"), variables)


def charliecloud_path() -> str:
    need_image_builder()
    if not shutil.which("ch-run") and os.geteuid() == 0 and shutil.which("apt-get"):
        run("apt-get", "install", "-y", "-qq", "charliecloud-runtime", "squashfuse", check=False,
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    if not shutil.which("ch-run"):
        raise Unavailable("Charliecloud is not installed (apt-get install charliecloud-runtime)")
    variables, _ = start_cluster()
    top = f"/{REPO.parts[1]}"  # ch-run binds only onto directories the image has (it has /work, /shared, ...)
    return submit_to_site("local", build("image", "sqsh"), variables, CONTAINER_MOUNTS=f"{top}:{top}")


def cluster_script():
    sys.path.insert(0, str(REPO / "scripts"))
    import slurm_cluster

    return slurm_cluster


def baremetal_path() -> str:
    variables, _ = start_cluster()
    script = DEMO / "demo.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --job-name=curator-array-demo\n#SBATCH --cpus-per-task=1\n"
        f"#SBATCH --output={LOGS}/slurm_%A_%a.out\n"
        f"srun --ntasks-per-node=1 {REPO}/entrypoints/curator-array-entrypoint {' '.join(RUN_OPTIONS)}\n"
    )
    env = job_env(SLURM_CONF=variables["SLURM_CONF"])
    job = run("sbatch", "--parsable", f"--array=0-{SHARDS - 1}", str(script), env=env).stdout.strip().split(";")[0]
    print(f"  submitted array job {job}: sbatch --array=0-{SHARDS - 1} (entrypoint on bare metal); waiting")
    wait_for([job], env)
    report_elements(f"slurm_{job}_*.out")
    return variables["SLURM_CONF"]


def local_path() -> None:
    processes = []
    for shard in range(SHARDS):
        log = open(LOGS / f"shard_{shard}.log", "w")
        env = job_env(SLURM_ARRAY_TASK_ID=str(shard), SLURM_ARRAY_TASK_COUNT=str(SHARDS))
        processes.append(subprocess.Popen([str(BIN / "curator-array"), "run", *RUN_OPTIONS], cwd=REPO, env=env,
                                          stdout=log, stderr=subprocess.STDOUT))
    for process in processes:
        process.wait()
    report_elements("shard_*.log")


def still_running() -> list[str]:
    """The throwaway services this demo (or an earlier one) left running, as the user sees them."""
    import dockerd

    slurm_cluster = cluster_script()
    left = []
    controller = slurm_cluster.pid_alive(slurm_cluster.DEFAULT_DIR / "run" / "slurmctld.pid")
    if controller:
        left.append(f"a throwaway SLURM cluster (slurmctld pid {controller}, its slurmd and munged) "
                    "from scripts/slurm_cluster.py")
    docker = dockerd.running_pid(dockerd.DEFAULT_DIR)
    if docker:
        left.append(f"a throwaway dockerd (pid {docker}) from scripts/dockerd.py")
    return left


def main() -> int:
    LOGS.mkdir(parents=True, exist_ok=True)
    forced = os.environ.get("DEMO_MODE", "auto")
    paths = [("pyxis", "the image under pyxis/enroot on a throwaway SLURM cluster", pyxis_path),
             ("oci", "the image under SLURM's own OCI containers (srun --container, runc)", oci_path),
             ("charliecloud", "the image under Charliecloud (ch-run) on a throwaway SLURM cluster", charliecloud_path),
             ("slurm", "the entrypoint on a throwaway SLURM cluster, without a container", baremetal_path),
             ("local", "four local processes standing in for sbatch --array=0-3", local_path)]
    if forced != "auto":
        paths = [p for p in paths if p[0] == forced]
    began = time.monotonic()
    slurm_conf = None
    for name, what, path in paths:
        print(f"curator-array demo: trying the {name} path ({what})")
        try:
            slurm_conf = path()
            break
        except Unavailable as why:
            print(f"  not possible here: {why}")
    else:
        return 1
    print(f"curator-array demo: {name} path done in {time.monotonic() - began:.1f}s\n")
    env = job_env(**({"SLURM_CONF": slurm_conf} if slurm_conf else {}))
    print(run(str(BIN / "curator-array"), "status", "--checkpoint-path", str(CHECKPOINT), env=env, check=False).stdout)
    print(f"outputs:   {OUTPUT}/ ({len(list(OUTPUT.glob('*.parquet')))} Parquet files)")
    print(f"manifests: {CHECKPOINT}/.nemo_curator_metadata/.slurm_array_completion/")
    print(f"logs:      {LOGS}/")
    print(f"retry:     curator-array retry --checkpoint-path {CHECKPOINT} --format fields   (empty = nothing to do)")
    services = still_running()
    if services:
        print("\nstill running, for the next demo or test run (they use no CPU while idle):")
        for service in services:
            print(f"  {service}")
        print("stop them with: make demo-stop")
    left = run(str(BIN / "curator-array"), "retry", "--checkpoint-path", str(CHECKPOINT), env=env, check=False)
    return 0 if left.returncode == 0 and not left.stdout.strip() else 1


if __name__ == "__main__":
    sys.exit(main())
