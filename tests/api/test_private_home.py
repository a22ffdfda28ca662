"""The databases a running service creates are private (issue 18, finding 6)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_runtime_and_app_files_are_private(runtime: Any, make_app: Any) -> None:
    home = Path(runtime.settings.home)
    assert _mode(home) == 0o700
    databases = sorted(home.glob("*.sqlite3*"))
    assert databases
    for path in databases:
        assert _mode(path) == 0o600, (path.name, oct(_mode(path)))
    app = make_app()
    with TestClient(app) as c:
        assert c.get("/healthz").status_code == 200
    app_home = Path(app.state.settings.home)
    assert _mode(app_home) == 0o700
    for path in app_home.glob("keys.sqlite3*"):
        assert _mode(path) == 0o600, (path.name, oct(_mode(path)))
