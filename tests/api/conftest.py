"""Fixtures for the HTTP API tests: one real runtime per session, apps around it.

The runtime loads the real Kokoro model once; every app under test shares it
but has its own home directory (keys, settings), so auth and limits can be
varied per test without reloading models.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.bootstrap import Runtime, build_runtime
from voxclone.config import Settings
from voxclone.devserver import free_loopback_port


@pytest.fixture(scope="session")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    home = tmp_path_factory.mktemp("voxclone-runtime")
    # The job worker looks for new jobs every 0.25 s, not every 1 s: a job the
    # tests submit waited 0.5-1.5 s (1 s on average) for the worker to wake
    # before it started, ~50 jobs in this folder; tests/e2e/restart_settings.py
    # polls at 0.2 s for the same reason.
    rt = build_runtime(Settings(home=home, job_poll_s=0.25), warmup=True)
    try:
        yield rt
    finally:
        rt.close()


AppFactory = Callable[..., FastAPI]


class AppRuntime:
    """The runtime one test's apps serve: the shared one, or a copy of it with
    some parts replaced (``Runtime`` is frozen, so a fake voice service goes into
    a copy, never into the shared runtime). ``replace`` also moves the apps
    made before it onto the copy, whichever fixture ran first."""

    def __init__(self, runtime: Runtime) -> None:
        self.current = runtime
        self.apps: list[FastAPI] = []

    def replace(self, **parts: Any) -> Runtime:
        self.current = dataclasses.replace(self.current, **parts)
        for app in self.apps:
            app.state.runtime = self.current
        return self.current


@pytest.fixture()
def app_runtime(runtime: Runtime) -> AppRuntime:
    return AppRuntime(runtime)


@pytest.fixture()
def make_app(app_runtime: AppRuntime, tmp_path: Path) -> AppFactory:
    """Build an app on the shared runtime; keyword arguments override Settings fields."""
    counter = iter(range(1000))

    def factory(**overrides: Any) -> FastAPI:
        home = tmp_path / f"app{next(counter)}"
        # TestClient sends "Host: testserver", which the Host guard refuses
        # without keys; tests of the guard pass their own list.
        overrides.setdefault("allowed_hosts", ["testserver"])
        settings = Settings(home=home, **overrides)
        app = create_app(settings, runtime=app_runtime.current)
        app_runtime.apps.append(app)
        return app

    return factory


@pytest.fixture()
def client(make_app: AppFactory) -> Iterator[TestClient]:
    with TestClient(make_app()) as c:
        yield c


class LiveServer:
    """uvicorn serving an app in a thread of this process, on a loopback port."""

    def __init__(self, app: FastAPI) -> None:
        import uvicorn

        self.app = app
        self.port = free_loopback_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture()
def live_server(make_app: AppFactory) -> Callable[..., LiveServer]:
    """Start (as a context manager) a real HTTP server around a fresh app."""

    def start(**overrides: Any) -> LiveServer:
        return LiveServer(make_app(**overrides))

    return start
