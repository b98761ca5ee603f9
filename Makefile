# Each target makes .venv (with the project, its test extra, its distributed extra: Ray, for the
# cluster tests, and its cuda extra: numba-cuda, whose simulator runs the CUDA tests without a GPU,
# with the NVVM that compiles every CUDA kernel to PTX) when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow bench fuzz chaos clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,distributed,cuda]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py
	$(BIN)/flowjit bench --quick

test: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -n 2

# The full sweeps that make test runs a sample of (tests marked sweep): with make fuzz, the rest of CI's checks.
test-slow: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -n 2 -m sweep

fuzz: $(STAMP)
	$(BIN)/python tests/fuzz.py --count $(or $(N),2000)

# Cluster tasks killed at random points of a multi-step run: N kills (CI's suite makes 20); and the
# tasks on two separate raylets (the multi-host code path; ~20 s, so not in CI's suite).
chaos: $(STAMP)
	FLOWJIT_CHAOS_KILLS=$(or $(N),200) FLOWJIT_MULTINODE=1 HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -q \
		tests/distributed/test_cluster.py tests/distributed/test_cluster_train.py \
		-k "killed_at_random_points or raylets or ray_client or beside_another or killed_at_random_steps" -s

bench: $(STAMP)
	$(BIN)/flowjit bench --json bench-results.json --plot bench-results.png
	$(BIN)/flowjit bench --suite programs --json bench-programs.json
	$(BIN)/python -m flowjit.bench.pipeline_scaling
	$(BIN)/python -m flowjit.bench.reductions
	$(BIN)/flowjit bench --compile-scaling
	$(BIN)/python -m flowjit.bench.hosts --json bench-hosts.json

clean:
	rm -rf $(VENV) build *.egg-info
