"""Every test in tests/unit runs under unit_guard (no subprocess, no server)
and within a CPU budget (no model load, nothing slow): issue 51."""

from __future__ import annotations

import importlib
from collections.abc import Generator, Iterator
from typing import Any

# Importing phonemizer's espeak backend runs ldconfig once (dlinfo's glibc
# probe, through ctypes.util.find_library): an import's one-time cost, not a
# child the test starts. Imported here, before any test, so the guard judges
# the tests and not the order in which they first import G2P (32 of them
# failed on it, whichever came first).
import phonemizer.backend.espeak.wrapper  # noqa: F401
import pytest
from matplotlib import font_manager
from pluggy import Result
from threadpoolctl import ThreadpoolController
from unit_guard import install_guard

import cpu_cost

# The libraries the product imports inside functions (serving stays light),
# imported once here, so the CPU budget below charges a test for its own work
# and not for being the first to need one (scipy.signal alone: 0.4 s from
# bytecode, 2 s from source; boto3 0.46 s: a test file run alone failed the
# budget by it).
PREIMPORTED = (
    "scipy.signal",
    "pyworld",
    "c2pa",
    "cryptography.x509",
    "cryptography.hazmat.primitives.asymmetric.ec",
    "sqlalchemy.dialects.postgresql",
    "boto3",
    "redis",
    "voxclone.runtime.blobs_s3",
)
for _module in PREIMPORTED:
    importlib.import_module(_module)

# matplotlib's font list, which benchmark plots need: on a machine that has
# never drawn one it is found by running fc-list (a child the guard refuses:
# on a fresh machine the bench smoke tests failed on it, whichever came first)
# and cached in the user's home.
font_manager.fontManager.get_default_size()

# The BLAS libraries loaded so far (numpy's, scipy's), each test limited to one
# thread of them, so a test's matrix work runs in its own thread, where the
# budget counts it (tests/cpu_cost.py); idle OpenBLAS threads also spin, which
# on a loaded host charged a 0.15 s test 2.6 s of process CPU.
BLAS = ThreadpoolController()


@pytest.fixture(autouse=True)
def _one_blas_thread() -> Iterator[None]:
    with BLAS.limit(limits=1, user_api="blas"):
        yield


@pytest.fixture(autouse=True)
def _no_subprocess_or_server() -> Iterator[None]:
    # Its own MonkeyPatch: a test's monkeypatch.undo() leaves the guard in place.
    with pytest.MonkeyPatch.context() as patch:
        install_guard(patch)
        yield


# Under a second of CPU each, setup included (tests/cpu_cost.py): the slowest
# unit test took 0.75 s on an idle 2-core host, 6 of 1,491 over 0.5 s
# (2026-12-08, teardown counted); a slower host gets more (cpu_cost.enforce);
# tests over it (a model, a large render, a long search) are in tests/integration.
UNIT_CPU_BUDGET_S = 1.0
ADVICE = (
    "tests/unit loads no model and runs nothing slow: make it cheaper or move it to "
    "tests/integration"
)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    cpu_cost.start(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, Result[pytest.TestReport], None]:
    outcome = yield
    cpu_cost.enforce(item, outcome.get_result(), UNIT_CPU_BUDGET_S, ADVICE)
