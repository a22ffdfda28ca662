"""A server stopped while its models still load shuts down within its grace.

A container stopped before it was ready (SIGTERM during model loading) used to
wait up to 60 s for the loader thread, past any stop grace period, and was
SIGKILLed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import voxclone.bootstrap
from voxclone.api.app import create_app
from voxclone.config import Settings


def test_shutdown_does_not_wait_for_a_slow_model_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def slow_build_runtime(*args: Any, **kwargs: Any) -> Any:
        release.wait(timeout=30)  # a model load that outlasts the shutdown
        raise RuntimeError("load abandoned")

    monkeypatch.setattr(voxclone.bootstrap, "build_runtime", slow_build_runtime)
    app = create_app(Settings(home=tmp_path))
    try:
        with TestClient(app, base_url="http://127.0.0.1") as client:
            assert client.get("/readyz").status_code == 503
            started = time.monotonic()
        assert time.monotonic() - started < 10.0
    finally:
        release.set()
