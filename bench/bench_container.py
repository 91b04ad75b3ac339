"""Container figures, measured side by side in one run on the throwaway SLURM cluster.

For SLURM's own OCI containers (`srun --container`, runc, the bundle of `make oci`),
Charliecloud (`ch-run` of the `.sqsh` of `make sqsh`) and bare metal (the checkout's venv),
each through its rendered site script:

- from `sbatch` to the entrypoint's first log line of a one-element array (what a user waits
  before anything happens), and
- the wall time of a 4-element array on the bundled sample (from `sbatch` until SLURM says
  every element ended),

three rounds, the runtimes in turn within each round; medians are printed. Also the image's
size, and the time and size of each conversion (the image is built, or reused, first).
Needs root (the throwaway dockerd and cluster), runc and Charliecloud, which
it installs from Debian when missing. Asserts nothing.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "container"))
import build_image  # noqa: E402  (container/build_image.py, the Makefile's build tool)

CURATOR = str(REPO / ".venv" / "bin" / "curator-array")
OPTIONS = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--no-progress"]
FIRST_LINE = "curator-array entrypoint:"
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SITES = {  # runtime -> the site file's text (partition and size of the throwaway cluster)
    "oci": 'runtime = "oci"\n',
    "charliecloud": 'runtime = "charliecloud"\n',
    "baremetal": f'runtime = "baremetal"\ninstall_dir = "{REPO}"\nvenv = "{REPO / ".venv"}"\n',
}
COMMON = 'partition = "debug"\ntime = "00:30:00"\ncpus_per_task = 1\nsignal_seconds = 60\n'


def timed(func) -> tuple[float, object]:
    began = time.perf_counter()
    result = func()
    return time.perf_counter() - began, result


def ensure_packages(packages: dict[str, str]) -> None:
    missing = sorted({package for tool, package in packages.items() if not shutil.which(tool)})
    if missing:
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, capture_output=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def start_cluster() -> dict[str, str]:
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "slurm_cluster.py"), "start", "--nodes", "3",
                          "--max-array-size", "5"], check=True, capture_output=True, text=True).stdout
    return dict(line[len("export "):].split("=", 1) for line in out.splitlines() if line.startswith("export "))


def render_sites(directory: Path) -> dict[str, Path]:
    shutil.copytree(REPO / "site_configs" / "templates", directory / "templates")
    for runtime, text in SITES.items():
        (directory / f"bench-{runtime}.toml").write_text(text + COMMON)
        subprocess.run([CURATOR, "render-site", "--sites-dir", str(directory), f"bench-{runtime}"], check=True,
                       capture_output=True)
    return {runtime: directory / f"bench-{runtime}.sbatch" for runtime in SITES}


def ended(job: str, env: dict[str, str]) -> bool:
    return not subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True, env=env).stdout.strip()


def submit(script: Path, elements: int, work: Path, env: dict[str, str]) -> tuple[float, float]:
    """(seconds to the first element's entrypoint line, seconds until every element ended)."""
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    for log in work.glob("slurm_*.out"):
        log.unlink()
    began = time.perf_counter()
    job = subprocess.run(["sbatch", "--parsable", f"--array=0-{elements - 1}", f"--output={work}/slurm_%A_%a.out",
                          str(script), *OPTIONS], check=True, capture_output=True, text=True,
                         env=dict(env, OUTPUT_DIR=str(out))).stdout.strip().split(";")[0]
    first = None
    while True:
        now = time.perf_counter() - began
        if first is None and any(FIRST_LINE in p.read_text(errors="replace") for p in work.glob("slurm_*.out")):
            first = now
        if ended(job, env):
            complete = len(list((out / ".nemo_curator_metadata" / ".slurm_array_completion").glob("completed_*")))
            if complete != elements:
                logs = "\n".join(p.read_text(errors="replace")[-1500:] for p in work.glob("slurm_*.out"))
                sys.exit(f"{script.name}: {complete} of {elements} elements completed\n{logs}")
            return first if first is not None else now, now
        time.sleep(0.02)


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("bench_container needs root (the throwaway dockerd and SLURM cluster)")
    ensure_packages({"ch-run": "charliecloud-runtime", "squashfuse": "squashfuse", "mksquashfs": "squashfs-tools",
                     "runc": "runc"})
    tag = build_image.DEFAULT_TAG
    build_s, _ = timed(lambda: build_image.build_image(tag, None))
    image = build_image.docker_client().images.get(tag)
    with tempfile.TemporaryDirectory(dir=REPO / "build") as tmp:
        sqsh_s, sqsh = timed(lambda: build_image.build_sqsh(tag, Path(tmp) / "bench.sqsh"))
        oci_s, oci = timed(lambda: build_image.build_oci(tag, Path(tmp) / "bench.oci"))
        variables = start_cluster()
        # ch-run makes its mount point on first use, and elements starting at once race to (docs/containers.md).
        Path(f"/var/tmp/{os.environ.get('USER', 'root')}.ch/mnt").mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as shared:  # under /tmp: ch-run shares it, runc binds it
            work = Path(shared)
            shutil.copytree(REPO / "sample_data" / "jsonl", work / "in")
            scripts = render_sites(work / "sites")
            env = dict(os.environ, SLURM_CONF=variables["SLURM_CONF"], INPUT_DIR=str(work / "in"),
                       USER=os.environ.get("USER", "root"))
            images = {"oci": str(oci), "charliecloud": str(sqsh), "baremetal": ""}
            starts: dict[str, list[float]] = {runtime: [] for runtime in SITES}
            arrays: dict[str, list[float]] = {runtime: [] for runtime in SITES}
            for _ in range(ROUNDS):
                for runtime, script in scripts.items():
                    runtime_env = dict(env, CONTAINER_IMAGE=images[runtime])
                    starts[runtime].append(submit(script, 1, work, runtime_env)[0])
                    arrays[runtime].append(submit(script, 4, work, runtime_env)[1])
        print(f"image {tag}: {image.attrs['Size'] / 2**20:.0f} MiB, built or reused in {build_s:.1f} s")
        print(f".sqsh (Charliecloud, pyxis): {sqsh.stat().st_size / 2**20:.0f} MiB in {sqsh_s:.1f} s; "
              f"OCI bundle: {du_mib(oci):.0f} MiB in {oci_s:.1f} s")
    print(f"medians of {ROUNDS} rounds, the runtimes in turn; 12 sample files, 1,512 rows")
    print(f"{'runtime':<14}{'sbatch -> first line':>22}{'4-element array':>18}{'vs bare metal':>16}")
    for runtime in SITES:
        start, array = statistics.median(starts[runtime]), statistics.median(arrays[runtime])
        ratio = array / statistics.median(arrays["baremetal"])
        print(f"{runtime:<14}{start:>20.2f} s{array:>16.2f} s{ratio:>15.2f}x")


def du_mib(path: Path) -> float:
    return int(subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True).stdout.split()[0]) / 1024


if __name__ == "__main__":
    main()
