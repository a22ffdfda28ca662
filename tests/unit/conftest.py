"""Every test in tests/unit runs under unit_guard: no subprocess, no server (issue 51)."""

from __future__ import annotations

from collections.abc import Iterator

# Importing phonemizer's espeak backend runs ldconfig once (dlinfo's glibc
# probe, through ctypes.util.find_library): an import's one-time cost, not a
# child the test starts. Imported here, before any test, so the guard judges
# the tests and not the order in which they first import G2P (32 of them
# failed on it, whichever came first).
import phonemizer.backend.espeak.wrapper  # noqa: F401
import pytest
from unit_guard import install_guard


@pytest.fixture(autouse=True)
def _no_subprocess_or_server() -> Iterator[None]:
    # Its own MonkeyPatch: a test's monkeypatch.undo() leaves the guard in place.
    with pytest.MonkeyPatch.context() as patch:
        install_guard(patch)
        yield
