"""Fixtures for the real-browser UI tests: the real app in a subprocess + Debian's Chromium.

The app runs as a separate process (like production) on a free loopback port with a
throwaway ``VOXCLONE_HOME``; Chromium is the system package driven by Playwright's
Python API. We never run ``playwright install``: the browser comes from Debian.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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

# Started with ``python -c`` so the test does not depend on an app-factory entry point.
_LAUNCHER = (
    "import sys, uvicorn\n"
    "from voxclone.api.app import create_app\n"
    "from voxclone.config import Settings\n"
    "uvicorn.run(create_app(Settings()), host='127.0.0.1', port=int(sys.argv[1]),"
    " log_level='warning')\n"
)


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


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
    log_path = home / "server.log"
    port = _free_loopback_port()
    env = {**os.environ, "VOXCLONE_HOME": str(home)}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _ready(base_url):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                pytest.fail(f"voxclone app did not become ready; log tail:\n{tail}", pytrace=False)
            time.sleep(0.5)
        yield base_url
    finally:
        _stop(proc)


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
