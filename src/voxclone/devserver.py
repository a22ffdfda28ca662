"""Real voxclone servers in subprocesses, for tests and benchmarks.

A server is configured the way an operator would do it — its own
``VOXCLONE_HOME`` and ``VOXCLONE_*`` variables in the environment — and runs
the app factory under uvicorn on a free port of 127.0.0.1 (never another
interface). It is ready once ``GET /readyz`` answers 200, and is stopped
(terminate, then kill) when its context exits. Not used by the service itself.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

HOST = "127.0.0.1"  # loopback only
READY_TIMEOUT_S = 180.0  # model load + warm-up on a busy 2-core machine
_STOP_TIMEOUT_S = 15.0
# The directory that holds the ``voxclone`` package, so the child imports this
# same code even where the package is not installed.
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]

# Python source that serves the app factory under uvicorn on ``VOXCLONE_PORT``,
# without the CLI, so the caller's environment controls every setting.
APP_LAUNCHER = (
    "import os, uvicorn; from voxclone.api.app import create_app; "
    "from voxclone.config import Settings; "
    "uvicorn.run(create_app(Settings()), host='127.0.0.1', "
    "port=int(os.environ['VOXCLONE_PORT']), log_level='warning')"
)


class ServerNotReady(RuntimeError):
    """The server exited, or did not answer ``/readyz`` with 200 in time."""


def free_loopback_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_ready(
    url: str, timeout_s: float, *, process: subprocess.Popen[bytes] | None = None
) -> None:
    """Poll ``url``/readyz until it answers 200; give up early if ``process`` exits."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while True:
            if process is not None and process.poll() is not None:
                raise ServerNotReady(f"server exited with code {process.returncode} before ready")
            try:
                if client.get(url + "/readyz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise ServerNotReady(f"server not ready after {timeout_s:.0f} s")
            time.sleep(0.25)


@dataclass
class ServerProcess:
    """One launched server: where it listens, its process and its combined output."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)

    def log_tail(self, chars: int = 2000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def start_server(
    home: Path,
    env: Mapping[str, str] | None,
    stack: ExitStack,
    *,
    launcher: str = APP_LAUNCHER,
) -> ServerProcess:
    """Launch one server (not yet ready) with output in ``home``/server.log.

    ``launcher`` is the Python source the child runs; it finds its port in
    ``VOXCLONE_PORT``. ``stack`` stops the server when it closes.
    """
    home.mkdir(parents=True, exist_ok=True)
    port = free_loopback_port()
    full_env = {
        **os.environ,
        **(env or {}),
        "VOXCLONE_HOME": str(home),
        "VOXCLONE_HOST": HOST,
        "VOXCLONE_PORT": str(port),
        "PYTHONPATH": os.pathsep.join([str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    log_path = home / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", launcher], env=full_env, stdout=log, stderr=subprocess.STDOUT
        )
    stack.callback(_stop, process)
    return ServerProcess(f"http://{HOST}:{port}", process, log_path)


@contextmanager
def running_servers(
    homes: list[Path],
    env: Mapping[str, str] | None = None,
    *,
    timeout_s: float = READY_TIMEOUT_S,
    launcher: str = APP_LAUNCHER,
) -> Iterator[list[ServerProcess]]:
    """One server per home, started in parallel; yields once all are ready, stops all after.

    Raises ``ServerNotReady`` (with the end of the server's log) if one is not.
    """
    with ExitStack() as stack:
        servers = [start_server(home, env, stack, launcher=launcher) for home in homes]
        for server in servers:
            try:
                wait_ready(server.url, timeout_s, process=server.process)
            except ServerNotReady as exc:
                raise ServerNotReady(f"{exc}; log tail:\n{server.log_tail()}") from None
        yield servers


@contextmanager
def running_server(
    home: Path,
    env: Mapping[str, str] | None = None,
    *,
    timeout_s: float = READY_TIMEOUT_S,
    launcher: str = APP_LAUNCHER,
) -> Iterator[ServerProcess]:
    """One ready server on ``home``; see ``running_servers``."""
    with running_servers([home], env, timeout_s=timeout_s, launcher=launcher) as (server,):
        yield server
