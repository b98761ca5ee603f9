# Each target makes .venv (with the project and its test extra) when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench fuzz clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py
	$(BIN)/flowjit bench --quick

test: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(BIN)/python -m pytest -n 2

fuzz: $(STAMP)
	$(BIN)/python tests/fuzz.py --count $(or $(N),2000)

bench: $(STAMP)
	$(BIN)/flowjit bench --json bench-results.json --plot bench-results.png
	$(BIN)/flowjit bench --suite programs --json bench-programs.json
	$(BIN)/python -m flowjit.bench.pipeline_scaling
	$(BIN)/python -m flowjit.bench.reductions
	$(BIN)/flowjit bench --compile-scaling

clean:
	rm -rf $(VENV) build *.egg-info
