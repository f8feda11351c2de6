# Quickstart: `make demo` (whole pipeline on bundled data, tiny model, CPU) and `make test`.
# Both create .venv at the repo root, install the project (editable; without byte-compiling every installed
# module, which took half the install: Python compiles what a run imports, once), make sure a Docker engine
# answers (installing docker.io and starting dockerd on Debian as root); `make test` builds the sandbox image
# when missing, `make demo` leaves that to its verify stage; the engine and the image's root filesystem are
# made in the background while the project installs (scripts/sandbox-prefetch.sh).
# `make test` also installs the `hf` extra (datasets, for hf: sources), vLLM 0.32.0 (the CPU build on a CPU
# torch) for the vLLM backend tests (scripts/install-vllm.sh says how it coexists with Prefect 3.9), and the
# `gpu` extra's liger-kernel with Triton into a folder of their own, .venv/liger-cpu, which the Liger test puts
# on its subprocess's path (the CPU build of vLLM must not see Triton in the venv). `make demo` needs none.
SHELL := /bin/bash
# What a run imports is byte-compiled into .venv by its first import (the install compiles nothing, above); a
# PYTHONDONTWRITEBYTECODE from the caller's environment would stop that, and every process of a run (Prefect
# server, Dask workers, torchrun ranks, each test's `klear` subprocess) would compile torch, transformers and
# Prefect from source again: ~4.5 s more per process start on 2 cores (docs/benchmarks.md).
unexport PYTHONDONTWRITEBYTECODE
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
KLEAR := $(VENV)/bin/klear
STAMP := $(VENV)/.installed
VLLM_STAMP := $(VENV)/.vllm-installed
HF_STAMP := $(VENV)/.hf-installed
LIGER_DIR := $(VENV)/liger-cpu

.PHONY: demo test setup vllm hf liger-cpu docker sandbox-image bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@bash scripts/sandbox-prefetch.sh $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

$(VLLM_STAMP): $(STAMP) pyproject.toml scripts/install-vllm.sh
	@bash scripts/install-vllm.sh $(PY)
	@touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

# The `hf` extra (Hugging Face datasets as curation sources), which the tests of hf: sources need.
$(HF_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q --no-compile -e '.[dev,hf]'
	@touch $(HF_STAMP)

hf: $(HF_STAMP)

# Liger Kernel and Triton for tests/training/test_nll_kernels.py (Triton's interpreter runs Liger on CPU).
$(LIGER_DIR)/.installed: $(STAMP) pyproject.toml
	$(PY) -m pip install -q --no-deps --target $(LIGER_DIR) 'liger-kernel==0.8.5' 'triton==3.9.0'
	@touch $@

liger-cpu: $(LIGER_DIR)/.installed

docker:
	@bash scripts/ensure-docker.sh

sandbox-image: setup docker
	@if $(KLEAR) sandbox --help >/dev/null 2>&1; then $(KLEAR) sandbox build; fi

# The demo's verify stage builds the sandbox image when missing (from the root filesystem the prefetch makes
# meanwhile), so the pipeline starts without waiting for it.
demo: setup docker
	$(KLEAR) demo

# Two test processes (pytest-xdist): most tests wait on Docker, a Prefect server or a subprocess, so two share
# 2 cores well (docs/benchmarks.md); each has its own Prefect home and store (tests/conftest.py). TEST_WORKERS=0:
# one at a time.
TEST_WORKERS ?= 2

# The g++ image too (≈ 2.5 min the first time), so the C++ sandbox tests run rather than skip.
test: sandbox-image hf vllm liger-cpu
	$(KLEAR) sandbox build --cpp
	$(PY) -m pytest -n $(TEST_WORKERS) --durations=30

bench: setup
	$(PY) bench/curate.py

clean:
	rm -rf $(VENV) klear-store .pytest_cache

# The compose stack (Prefect server on Postgres, Dask scheduler + 2 sandbox workers, a klear-cpu worker):
# images from Debian packages (scripts/compose/images.py, no registry), then `docker-compose up -d`.
.PHONY: compose
compose: sandbox-image
	@PY=$(PY) bash scripts/compose/up.sh
