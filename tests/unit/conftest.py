"""Every test in tests/unit runs under unit_guard: no subprocess, no server (issue 51)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from unit_guard import install_guard


@pytest.fixture(autouse=True)
def _no_subprocess_or_server() -> Iterator[None]:
    # Its own MonkeyPatch: a test's monkeypatch.undo() leaves the guard in place.
    with pytest.MonkeyPatch.context() as patch:
        install_guard(patch)
        yield
