"""create_app(load_in_background=False): start-up waits for the models (Ray Serve).

A host such as Ray Serve routes to a replica as soon as its ASGI start-up
returns, so in that mode a failed model load must fail the start-up instead
of leaving a replica that answers 503 forever. No models are needed here:
the models folder (``models_dir``) is a file, so loading fails at once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.config import Settings


def unloadable(tmp_path: Path) -> Settings:
    # Models live apart from the home since issue 46: point the models folder
    # itself at a file (a home's own ``models`` path is no longer read).
    home = tmp_path / "home"
    home.mkdir()
    models = tmp_path / "models"
    models.write_text("not a directory")
    return Settings(home=home, models_dir=models)


def test_blocking_start_fails_when_models_cannot_load(tmp_path: Path) -> None:
    app = create_app(unloadable(tmp_path), load_in_background=False)
    with (
        pytest.raises(RuntimeError, match="model loading failed"),
        TestClient(app, base_url="http://127.0.0.1"),
    ):
        pass


def test_default_start_returns_at_once_and_reports_on_readyz(tmp_path: Path) -> None:
    app = create_app(unloadable(tmp_path))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/healthz").status_code == 200
        deadline = time.monotonic() + 60
        while True:
            resp = client.get("/readyz")
            if "failed" in resp.json()["error"]["message"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert resp.status_code == 503
        assert "model loading failed" in resp.json()["error"]["message"]


class _RecordingRuntime:
    """Just what the start-up path touches of a Runtime."""

    def __init__(self, events: list[str], settings: Settings) -> None:
        self._events = events
        # The start-up notes read these (missing model assets, the library id).
        self.settings = settings
        self.engines: dict[str, object] = {}
        self.voices = object()
        self.job_worker = None
        self.stages = type("Stages", (), {"as_dict": staticmethod(lambda: {})})()
        # The engines' rate is measured once speech is served (not an event here).
        self.speech = type("Speech", (), {"calibrate_in_background": staticmethod(lambda: None)})()

    def speech_idle(self) -> bool:
        return True

    def warm_cloning(self) -> None:
        self._events.append("warm_cloning")

    def start_job_worker(self) -> bool:
        return False

    def close(self) -> None:
        self._events.append("close")


@pytest.mark.parametrize("in_background", [False, True])
def test_only_a_background_start_waits_for_quiet_speech_before_loading_cloning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_background: bool
) -> None:
    # A blocking start (Ray) serves nothing until it returns, so the quiet wait
    # before the cloning load would only delay its readiness.
    events: list[str] = []
    monkeypatch.setattr(
        "voxclone.bootstrap.build_runtime",
        lambda settings, *a, **k: _RecordingRuntime(events, settings),
    )

    def quiet(*args: object, **kwargs: object) -> bool:
        events.append("quiet_wait")
        return True

    monkeypatch.setattr("voxclone.api.app.wait_for_quiet", quiet)
    settings = Settings(home=tmp_path / "home", warm_cloning=True, job_worker=False)
    app = create_app(settings, load_in_background=in_background)
    with TestClient(app, base_url="http://127.0.0.1"):
        deadline = time.monotonic() + 10
        while "warm_cloning" not in events and time.monotonic() < deadline:
            time.sleep(0.02)
    expected = ["quiet_wait", "warm_cloning"] if in_background else ["warm_cloning"]
    assert events[:-1] == expected
    assert events[-1] == "close"
