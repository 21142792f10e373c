# Two entry points for a newcomer: `make demo` and `make test`. Everything else supports them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup control-plane demo test lint

# The install compiles admitter/core and the simulator's loop with mypyc (setup.py); a changed
# source recompiles them, since the compiled modules shadow their sources.
$(BIN)/admitter: pyproject.toml setup.py $(wildcard admitter/core/*.py admitter/sim/*.py)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev,sim]'
	touch $@

setup: $(BIN)/admitter

control-plane:
	bash hack/build.sh

demo: setup control-plane
	$(BIN)/python -m admitter.testing.demo

test: setup control-plane
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/admitter crds --check
