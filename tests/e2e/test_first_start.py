"""What a new user sees: ``voxclone serve`` says when it is ready, and ``say`` uses it.

One real ``voxclone serve`` process (the CLI, not the bare app factory) on a
free loopback port:

* it prints ``voxclone ready — web UI http://…/  API docs http://…/docs`` on
  stdout once, and ``/readyz`` is already 200 when the line appears (uvicorn's
  own "running on" comes about 20 s before the models are warm);
* with stdout/stderr not a terminal, log lines are JSON; ``--log-format text``
  would make them plain (unit-tested in tests/unit/test_logging_format.py);
* ``voxclone say`` finds the running server on the configured port and speaks
  through it (its output names the server), and falls back to loading the
  models itself when nothing answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from voxclone.devserver import start_server

pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.timeout(400)]

SERVE_LAUNCHER = "import sys; from voxclone.api.cli import main; sys.exit(main(['serve']))"
READY_TIMEOUT_S = 240.0
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _readyz(url: str) -> int:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, list[int]]]:
    """A ready ``voxclone serve``: its URL, home, and /readyz answers seen before the line."""
    home = tmp_path_factory.mktemp("first-start")
    with ExitStack() as stack:
        server = start_server(home, {"VOXCLONE_LOG_FORMAT": "auto"}, stack, launcher=SERVE_LAUNCHER)
        seen_before: list[int] = []
        deadline = time.monotonic() + READY_TIMEOUT_S
        while "voxclone ready" not in server.log_tail(100_000):
            if server.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no ready line; log:\n{server.log_tail()}", pytrace=False)
            seen_before.append(_readyz(server.url))
            time.sleep(0.2)
        # Measured right after the line: it must not have come early.
        seen_before.append(_readyz(server.url))
        yield server.url, home, seen_before


def test_ready_line_comes_once_and_only_when_ready(served: tuple[str, Path, list[int]]) -> None:
    url, home, seen = served
    assert seen[-1] == 200, f"/readyz was {seen[-1]} when the ready line appeared"
    log = (home / "server.log").read_text(errors="replace")
    ready = [line for line in log.splitlines() if "voxclone ready" in line]
    assert ready == [f"voxclone ready — web UI {url}/  API docs {url}/docs"], ready
    # Not a terminal: every other line is a JSON log record.
    others = [line for line in log.splitlines() if line.strip() and "voxclone ready" not in line]
    assert others, "expected some log lines"
    for line in others:
        if line.startswith("{"):
            json.loads(line)
        else:  # third-party warnings written straight to stderr are not ours to format
            assert "Warning" in line or line.startswith(" "), line


def _say(args: list[str], home: Path, port: int) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "VOXCLONE_HOME": str(home),
        "VOXCLONE_PORT": str(port),
        "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
    }
    code = f"import sys; from voxclone.api.cli import main; sys.exit(main({args!r}))"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )


def test_say_uses_the_running_local_server(
    served: tuple[str, Path, list[int]], tmp_path: Path
) -> None:
    url, home, _ = served
    port = int(url.rsplit(":", 1)[1])
    out = tmp_path / "hello.wav"
    started = time.monotonic()
    proc = _say(["say", "Hello there.", "-o", str(out)], home, port)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert f"via {url}" in proc.stderr, proc.stderr
    assert out.read_bytes()[:4] == b"RIFF" and out.stat().st_size > 10_000
    # Bad input through the server is still a one-line error and exit 2.
    bad = _say(["say", "Hi.", "-o", str(tmp_path / "x.wav"), "--voice", "nobody"], home, port)
    assert bad.returncode == 2 and "nobody" in bad.stderr, bad.stderr
    assert elapsed < 60, elapsed


def test_say_with_an_explicit_dead_server_fails_clearly(tmp_path: Path) -> None:
    from voxclone.devserver import free_loopback_port

    dead = f"http://127.0.0.1:{free_loopback_port()}"
    proc = _say(["say", "Hi.", "-o", str(tmp_path / "x.wav"), "--server", dead], tmp_path, 1)
    assert proc.returncode == 3, proc.stderr  # no server at --server (api/cli_exit.py)
    assert dead in proc.stderr and "Traceback" not in proc.stderr


def test_speech_is_ready_before_cloning_and_readyz_says_which(
    served: tuple[str, Path, list[int]],
) -> None:
    """/readyz is per capability: speech as soon as the engines are warm (the
    cloning models load after it), ``?capability=cloning`` once they are; the
    start-up stages are in the detail."""
    url, _home, _ = served
    with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
        detail = json.loads(response.read())["detail"]
    assert detail["speech"] == "ready" and detail["cloning"] in ("warming", "ready")
    assert {"kokoro_load", "kokoro_warmup"} <= set(detail["startup_s"])
    deadline = time.monotonic() + READY_TIMEOUT_S
    while _readyz_cloning(url) != 200:
        assert time.monotonic() < deadline, "cloning models never became ready"
        time.sleep(0.5)
    with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
        detail = json.loads(response.read())["detail"]
    assert detail["cloning"] == "ready" and detail["startup_s"]["cloning_warmup"] > 0


def _readyz_cloning(url: str) -> int:
    try:
        with urllib.request.urlopen(f"{url}/readyz?capability=cloning", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        assert exc.code == 503
        return int(exc.code)


FEMALE_CLIP = Path(__file__).resolve().parents[1] / "data" / "librispeech_1088-129236-0000.wav"


def test_clone_uses_the_running_local_server(
    served: tuple[str, Path, list[int]],
) -> None:
    """``voxclone clone`` uploads to the running server (no model loading of its
    own): the voice is stored before any render (wait=false), and the command
    waits for the server's report job and prints the measured voice."""
    url, home, _ = served
    port = int(url.rsplit(":", 1)[1])
    deadline = time.monotonic() + READY_TIMEOUT_S
    while _readyz_cloning(url) != 200:  # when run alone, without the test above
        assert time.monotonic() < deadline, "cloning models never became ready"
        time.sleep(0.5)
    refused = _say(["clone", str(FEMALE_CLIP), "--name", "ada"], home, port)
    assert refused.returncode == 2 and "consent" in refused.stderr, refused.stderr
    proc = _say(["clone", str(FEMALE_CLIP), "--name", "ada", "--consent", "--json"], home, port)
    assert proc.returncode == 0, proc.stderr
    assert f"via {url}: it can speak now" in proc.stderr, proc.stderr
    assert "quality report succeeded" in proc.stderr, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["name"] == "ada" and summary["version"] == 2  # the measured version
    quality = summary["quality"]
    assert "report_pending" not in quality and isinstance(quality["similarity"], float)
    # Measured by the report job: the clone's pitch calibration, kept also when
    # a built-in won the stock check and was moved toward the reference (never
    # a plain built-in since issue 47).
    assert quality["tone_match"] is True
    assert "replaced_by_stock_voice" not in quality, quality
    assert quality["pitch_calibration"]["renders"] >= 1, quality
    assert "speaks as the built-in" not in proc.stderr, proc.stderr
