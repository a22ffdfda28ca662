"""Fixtures for the real-browser UI tests: the real app in a subprocess + Debian's Chromium.

The app runs as a separate process (like production) on a free loopback port with a
throwaway ``VOXCLONE_HOME``; Chromium is the system package driven by Playwright's
Python API. We never run ``playwright install``: the browser comes from Debian.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from voxclone.devserver import ServerNotReady, running_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Generated speech is played through Web Audio without a real click.
    "--autoplay-policy=no-user-gesture-required",
    # A fake microphone, so getUserMedia works without a prompt or hardware.
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
]
READY_TIMEOUT_S = 120.0
ARTIFACTS_DIR = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of the real voxclone app, ready (``/readyz`` == 200).

    ``VOXCLONE_UI_TEST_URL`` points the tests at a server that is already running
    (a deployment, or one started by hand) instead of starting one.
    """
    external = os.environ.get("VOXCLONE_UI_TEST_URL")
    if external:
        yield external.rstrip("/")
        return
    home = tmp_path_factory.mktemp("voxclone-home")
    try:
        with running_server(home, timeout_s=READY_TIMEOUT_S) as server:
            yield server.url
    except ServerNotReady as exc:
        pytest.fail(f"voxclone app did not become ready: {exc}", pytrace=False)


# Module scope, not session: Playwright's sync API keeps an event loop running
# in the main thread while it is open, which breaks later tests that call
# asyncio.run(). Closing it after the browser tests keeps the session clean.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture()
def artifacts_dir() -> Path:
    """Where screenshots go, for a person to look at after the run."""
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS_DIR
