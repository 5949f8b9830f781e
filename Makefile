# fedmem: two commands do all the set-up on a fresh machine.
#   make run    create .venv if needed, install, run the default experiment (extra Hydra overrides: ARGS="...")
#   make test   install with the dev extras, run the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch is installed first and pinned: on these CPU machines `torch==2.13.0` resolves to the CPU wheel on disk,
# while an unpinned torch (or letting another package pull it in) downloads several GB of CUDA packages.
TORCH  ?= torch==2.13.0
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: run test install install-dev system-deps bench flwr-run clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# WordNet (synonym perturbations, PEARL) comes from Debian's wordnet-base; installed when missing and possible.
system-deps:
	@test -d /usr/share/wordnet || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	  (apt-get install -y -qq --no-install-recommends wordnet-base >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq --no-install-recommends wordnet-base >/dev/null)) ; } || \
	  echo "warning: WordNet not found (apt-get install wordnet-base); synonym perturbations will be unavailable"

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) "$(TORCH)"
	$(PIP) -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) -e ".[dev]"
	touch $@

install: system-deps $(VENV)/.installed
install-dev: system-deps $(VENV)/.installed-dev

run: install
	$(BIN)/fedmem run $(ARGS)

test: install-dev
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The same experiment through Flower's own CLI (`flwr run .`, managed local SuperLink, one supernode per client).
# FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1: run the apps in this venv; otherwise flwr 1.41 builds a runtime
# env with uv, which resolves torch from PyPI (CUDA build, several GB) even on a CPU machine.
flwr-run: install
	@cfg=$$($(BIN)/fedmem resolve $(ARGS) | tail -1) && \
	n=$$($(BIN)/python -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['data']['num_clients'])" "$$cfg") && \
	PATH="$(CURDIR)/$(BIN):$$PATH" FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 \
	  $(BIN)/flwr run . --run-config "config-path='$$cfg'" --federation-config "num-supernodes=$$n" --stream

bench: install-dev
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf runs .cache .pytest_cache
