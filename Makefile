# curator-array: every target installs what it needs into .venv first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# The versions every install uses: this venv, the image, the demo (`make lock` writes it).
LOCK := requirements.lock
UV_VERSION := 0.13.10
NEWEST_VENV ?= .venv-newest
# The tests of the layer that borrows Ray's internals, and of what sits on it.
EXECUTION_TESTS ?= tests/unit/test_ray_launcher.py tests/unit/test_pools_and_stages.py tests/unit/test_layers.py \
	tests/integration/test_clients.py tests/integration/test_fixed_cluster.py tests/integration/test_pools_ray.py \
	tests/integration/test_pipeline.py tests/integration/test_download_ray.py
DEMO_DIR ?= demo_output
PYTEST_ARGS ?=

IMAGE ?= curator-array:latest
BASE_IMAGE ?=
export DOCKER_BUILDKIT ?= 0

.PHONY: demo demo-stop test test-newest bench install lock clean-demo image base-image sqsh oci sif sites

# Bytecode is written here, once, on every core (15 s here; pip compiles one file at a time: 42 s).
# Left to imports it is not written where PYTHONDONTWRITEBYTECODE is set, as on our CI machines:
# every Ray worker and driver then compiled the 1,400 modules of `import ray.data` again, 5.0 CPU-s
# each instead of 1.4. Packages' own test suites and the installers are never imported by a run
# (2,275 of 8,080 modules, a quarter of the time) and are left out, as are Ray's libraries
# for training, tuning, serving and LLMs (1,300 modules; 18 s instead of 22.6 s here).
NEVER_IMPORTED := site-packages/(pip|setuptools|pkg_resources|_distutils_hack|uv)/|site-packages/.+/tests?/|site-packages/ray/(rllib|serve|tune|train|llm)/
# uv installs the locked packages in 12.8 s where pip took 36 s; the venv keeps its pip, which
# the fastText trainer, FineWeb's URL lists and the tests' reference environments install with.
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python -c $(LOCK) -e '.[test]'
	$(BIN)/python -m compileall -q -j 0 -x "$(NEVER_IMPORTED)" \
		"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
		curator_array tests bench scripts || echo "make install: some modules were not byte-compiled" >&2
	$(BIN)/python -m curator_array.stages.web.url_lists
	$(BIN)/python -m curator_array.classify.training --install
	touch $@

install: $(STAMP)

## The main job: a 4-shard array on the bundled sample data, then its status. It runs the
## image under pyxis/enroot on a throwaway SLURM cluster when it can (else bare metal on
## SLURM, else local processes) and says which path it took and why.
demo: $(STAMP)
	DEMO_DIR="$(DEMO_DIR)" $(BIN)/python scripts/demo.py

## Stop the throwaway SLURM cluster and dockerd that `make demo` (or the tests) left running.
demo-stop: $(STAMP)
	$(BIN)/python scripts/slurm_cluster.py stop
	$(BIN)/python scripts/dockerd.py stop

## The whole test suite (unit, real Ray, real SLURM, containers).
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## Write requirements.lock again: the newest versions pyproject.toml allows, installed in a scratch venv.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --upgrade pip
	.lock-venv/bin/pip install --quiet '.[test]'
	{ echo "# Every version this project installs (make install, make demo, the image): written by make lock."; \
	  .lock-venv/bin/pip freeze --exclude curator-array | LC_ALL=C sort -f; } > $(LOCK)
	rm -rf .lock-venv

## The newest Ray and pyarrow, whatever pyproject.toml allows, in a venv of their own, and the tests of the
## execution layer (the one that borrows Ray's internals): an upgrade is this command, then the bound.
test-newest:
	$(PYTHON) -m venv $(NEWEST_VENV)
	$(NEWEST_VENV)/bin/pip install --quiet --upgrade pip
	$(NEWEST_VENV)/bin/pip install --quiet -c $(LOCK) -e '.[test]'
	$(NEWEST_VENV)/bin/pip install --quiet --upgrade 'ray[data]' pyarrow
	$(NEWEST_VENV)/bin/python -m curator_array.stages.web.url_lists
	$(NEWEST_VENV)/bin/python -c "import ray, pyarrow; print('ray', ray.__version__, 'pyarrow', pyarrow.__version__)"
	$(NEWEST_VENV)/bin/python -m pytest $(EXECUTION_TESTS) $(PYTEST_ARGS)

## Benchmarks: ratios measured side by side in one run (never pass/fail).
## datatrove, the comparison point, is installed into .cache/bench-site, not into .venv.
bench: $(STAMP)
	$(BIN)/python bench/bench_core.py
	$(BIN)/python bench/bench_listing.py
	$(BIN)/python bench/bench_pipeline.py
	$(BIN)/python bench/bench_text.py
	$(BIN)/python bench/bench_startup.py
	$(BIN)/python bench/bench_download.py
	$(BIN)/python bench/bench_container.py
	$(BIN)/python bench/bench_pyxis.py
	$(BIN)/python bench/bench_web.py
	$(BIN)/python bench/bench_files.py
	$(BIN)/python bench/bench_fineweb.py
	$(BIN)/python bench/bench_quality.py
	$(BIN)/python bench/bench_classifier.py
	$(BIN)/python bench/bench_decont.py
	$(BIN)/python bench/bench_dedup.py
	$(BIN)/python bench/bench_signatures.py
	$(BIN)/python bench/bench_signatures_languages.py
	$(BIN)/python bench/bench_clusters.py
	$(BIN)/python bench/bench_components.py
	$(BIN)/python bench/bench_tokenize.py
	$(BIN)/python bench/bench_report.py
	$(BIN)/python bench/bench_resume.py

## Container image (DOCKER_HOST, the default socket, or a throwaway dockerd when root).
## Without a registry it builds its Debian base from packages first (`make base-image`);
## BASE_IMAGE=... picks another base.
image: $(STAMP)
	$(BIN)/python container/build_image.py image --tag $(IMAGE) $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE))

## A Debian base built from packages (mmdebstrap + docker import), for sites without a registry.
base-image: $(STAMP)
	$(BIN)/python container/build_image.py base

## enroot/pyxis squashfs of $(IMAGE) in build/ (also runs with Charliecloud); reused per image id.
sqsh: $(STAMP)
	$(BIN)/python container/build_image.py sqsh --tag $(IMAGE)

## OCI bundle (rootfs/ + config.json) of $(IMAGE) in build/, for SLURM's own `srun --container`
## (the daemon's flattened export, the runtime's default config with the image's); reused per image id.
oci: $(STAMP)
	$(BIN)/python container/build_image.py oci --tag $(IMAGE)

## Apptainer .sif of $(IMAGE); without Apptainer, saves the image and prints the command to run.
sif: $(STAMP)
	$(BIN)/python container/build_image.py sif --tag $(IMAGE)

## Render site_configs/<cluster>.toml into site_configs/<cluster>.sbatch (commit both).
sites: $(STAMP)
	$(BIN)/curator-array render-site --all

clean-demo:
	rm -rf $(DEMO_DIR)
