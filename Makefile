# Two entry points for a newcomer: `make demo` and `make test`. Everything else supports them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup control-plane operators helm browser demo test lint

# The install compiles admitter/core and the simulator's loop with mypyc (setup.py); a changed
# source recompiles them, since the compiled modules shadow their sources.
$(BIN)/admitter: pyproject.toml setup.py $(wildcard admitter/core/*.py admitter/core/steps/*.py admitter/sim/*.py)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev,sim]'
	touch $@

setup: $(BIN)/admitter

# Kubernetes at the newest supported minor (hack/kube/); `make test KUBE_MODULE=kube-1.34` builds
# and tests on the oldest (hack/kube-1.34/): the build script and the tests read the variable.
control-plane:
	bash hack/build.sh

# The job operators the integration tests run (JobSet's controller, KubeRay's operator,
# Kubeflow Trainer's controller manager), each built from its Go module by
# hack/go-operator.sh; cached like the above.
operators:
	bash hack/jobset/build.sh >/dev/null
	bash hack/kuberay/build.sh >/dev/null
	bash hack/trainer/build.sh >/dev/null

# Helm, for the chart's tests (deploy/helm/admitter); built from its Go module, cached.
helm:
	bash hack/helm/build.sh >/dev/null

# The dashboard's browser test drives Debian's `chromium` headless over the DevTools protocol;
# installed once with apt-get (as root, or through sudo), skipped when already there.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		chromium >/dev/null; }

demo: setup control-plane operators
	$(BIN)/python -m admitter.testing.demo

# The operators and Helm build in the background, at the lowest CPU priority, while the tests
# that need neither run (integration tests mostly wait on the control plane); a test that needs
# one waits for its build (hack/go-operator.sh, hack/helm/build.sh take a lock).
test: setup control-plane browser
	@nice -n 19 $(MAKE) --no-print-directory helm operators > hack/bin/.background-build.log 2>&1 & \
	$(BIN)/pytest; status=$$?; wait; exit $$status

# The chart is checked against deploy/ and the webhook registration (drift fails here).
lint: setup helm
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/admitter crds --check
	$(BIN)/admitter crds --check --out deploy/helm/admitter/crds
	$(BIN)/admitter crds --check --out deploy/crds
	"$$(bash hack/helm/build.sh)" lint --quiet --strict deploy/helm/admitter
	$(BIN)/pytest -q -p no:cacheprovider tests/deploy/test_helm_chart.py
