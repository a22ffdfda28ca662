# One-command entry points. Everything installs into .venv; apt packages are
# installed when missing (needs root or sudo, as on CI and fresh servers).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
APT_PKGS := redis-server chromium iproute2 util-linux postgresql

.PHONY: run serve test test-fast lint bench bench-quick install system-deps clean mutants

# pip's own progress (one line per package, a bar per download) instead of
# -q silence: the first install takes minutes and a person should see it move.
PIP := $(BIN)/pip install --progress-bar on

$(STAMP): pyproject.toml
	@echo "==> voxclone: creating $(VENV) and installing dependencies (first time: a few minutes)"
	$(PY) -m venv $(VENV)
	@echo "==> [1/3] upgrading pip"
	$(PIP) --upgrade pip
	# torch is pinned to the CPU build that ships with this environment; an
	# unpinned torch would pull a multi-GB CUDA build.
	@echo "==> [2/3] installing torch (CPU build)"
	$(PIP) "torch==2.13.0"
	@echo "==> [3/3] installing voxclone and its dependencies"
	$(PIP) -e ".[test]"
	touch $(STAMP)
	@echo "==> install done"

install: $(STAMP)

system-deps:
	@bash scripts/install_system_deps.sh $(APT_PKGS)

# Run the service on embedded defaults (SQLite + memory/disk cache, 127.0.0.1:8000).
run serve: install
	$(BIN)/voxclone serve

# Everything: unit, integration (real Redis), API, e2e, browser (real Chromium).
test: install system-deps
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow and not browser and not e2e"

# Mutation testing of the privacy- and contract-critical modules ([tool.mutmut]
# in pyproject.toml); before a release, not in every CI run. MUTANTS narrows the
# run to mutant names (globs), e.g. MUTANTS='voxclone.service.catalog*'.
MUTANTS ?=
mutants: install
	rm -rf mutants
	nice -n 10 $(BIN)/mutmut run --max-children 2 $(MUTANTS)
	$(BIN)/mutmut results

lint: install
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy src

bench-quick: install
	$(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python bench/run_all.py --quick

bench: install
	$(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
