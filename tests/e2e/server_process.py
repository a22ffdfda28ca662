"""Real voxclone servers in subprocesses, on free loopback ports, for e2e tests.

Each server gets its own ``VOXCLONE_HOME`` and any ``VOXCLONE_*`` overrides
through the environment, exactly as an operator would configure it, and is
stopped (terminate, then kill) when the context exits.
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

import httpx

HOST = "127.0.0.1"  # loopback only
READY_TIMEOUT_S = 180.0  # model load + warm-up on a busy 2-core machine
SRC = Path(__file__).resolve().parents[2] / "src"

# The app factory under uvicorn, without the CLI: the test controls every setting.
_SERVE = (
    "import os, uvicorn; from voxclone.api.app import create_app; "
    "from voxclone.config import Settings; "
    "uvicorn.run(create_app(Settings()), host='127.0.0.1', "
    "port=int(os.environ['VOXCLONE_PORT']), log_level='warning')"
)


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, chars: int = 2000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""


def _wait_ready(server: ServerProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited before ready:\n{server.log_tail()}")
        try:
            if httpx.get(server.url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"server not ready after {timeout_s:.0f} s:\n{server.log_tail()}")
        time.sleep(0.25)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def start_server(home: Path, env: Mapping[str, str], stack: ExitStack) -> ServerProcess:
    """Launch one server (not yet ready); ``stack`` stops it on exit."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_loopback_port()
    full_env = {
        **os.environ,
        **env,
        "VOXCLONE_HOME": str(home),
        "VOXCLONE_HOST": HOST,
        "VOXCLONE_PORT": str(port),
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    log_path = home / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", _SERVE], env=full_env, stdout=log, stderr=subprocess.STDOUT
        )
    stack.callback(_stop, process)
    return ServerProcess(f"http://{HOST}:{port}", process, log_path)


@contextmanager
def running_servers(
    homes: list[Path], env: Mapping[str, str], timeout_s: float = READY_TIMEOUT_S
) -> Iterator[list[ServerProcess]]:
    """Start one server per home in parallel, wait until all are ready, stop all after."""
    with ExitStack() as stack:
        servers = [start_server(home, env, stack) for home in homes]
        for server in servers:
            _wait_ready(server, timeout_s)
        yield servers
