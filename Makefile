# curator-array: every target installs what it needs into .venv first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= demo_output
PYTEST_ARGS ?=

.PHONY: demo test bench install clean-demo

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(STAMP)

## The main job: a 4-shard array on the bundled sample data, then its status.
demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" DEMO_DIR="$(DEMO_DIR)" scripts/demo.sh

## The whole test suite (unit, real Ray, real SLURM, containers).
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## Benchmarks: ratios measured side by side in one run (never pass/fail).
## datatrove, the comparison point, is installed into .cache/bench-site, not into .venv.
bench: $(STAMP)
	$(BIN)/python bench/bench_core.py
	$(BIN)/python bench/bench_pipeline.py
	$(BIN)/python bench/bench_startup.py
	$(BIN)/python bench/bench_download.py

clean-demo:
	rm -rf $(DEMO_DIR)
