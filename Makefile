# Two entry points for a newcomer: `make demo` and `make test`. Everything else supports them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup control-plane operators demo test lint

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

# The job operators the integration tests run (JobSet's controller); cached like the above.
operators:
	bash hack/jobset/build.sh >/dev/null

demo: setup control-plane
	$(BIN)/python -m admitter.testing.demo

test: setup control-plane operators
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/admitter crds --check
