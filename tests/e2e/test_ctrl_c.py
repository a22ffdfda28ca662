"""Ctrl-C stops ``voxclone serve`` (what ``make run`` runs) cleanly: exit 0, so
``make`` reports no "Error 130", and at once while the models still load
(it waited ~7 s for the loader thread)."""

from __future__ import annotations

import signal
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import pytest

from voxclone.devserver import ServerProcess, start_server

pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.timeout(300), pytest.mark.timed]

SERVE_LAUNCHER = "import sys; from voxclone.api.cli import main; sys.exit(main(['serve']))"


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def _wait_for(server: ServerProcess, path: str, status: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while _status(server.url + path) != status:
        assert server.process.poll() is None, server.log_tail()
        assert time.monotonic() < deadline, f"{path} never answered {status}"
        time.sleep(0.05)


def _interrupt(server: ServerProcess) -> tuple[int, float]:
    """Ctrl-C (SIGINT) and the exit code and seconds until the process ended."""
    started = time.monotonic()
    server.process.send_signal(signal.SIGINT)
    code = server.process.wait(timeout=60)
    return code, time.monotonic() - started


def test_ctrl_c_while_the_models_load_exits_at_once(tmp_path: Path) -> None:
    with ExitStack() as stack:
        server = start_server(tmp_path, None, stack, launcher=SERVE_LAUNCHER)
        _wait_for(server, "/healthz", 200, 120)  # listening; the models load after this
        loading = _status(server.url + "/readyz") == 503
        code, seconds = _interrupt(server)
    log = server.log_tail(20_000)
    assert code == 0, log
    assert "Traceback" not in log
    if loading:  # a very fast machine may have finished loading already
        assert "stopped while the models were loading" in log, log
        assert seconds < 4.0, seconds


def test_ctrl_c_after_ready_shuts_down_cleanly_with_exit_0(tmp_path: Path) -> None:
    with ExitStack() as stack:
        server = start_server(tmp_path, None, stack, launcher=SERVE_LAUNCHER)
        _wait_for(server, "/readyz", 200, 240)
        code, seconds = _interrupt(server)
    log = server.log_tail(20_000)
    assert code == 0, log
    assert "voxclone: stopped" in log and "Traceback" not in log
    assert "interrupted" not in log
    assert seconds < 30.0, seconds
