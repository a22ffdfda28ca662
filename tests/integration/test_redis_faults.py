"""Redis faults against a private, real redis-server (append-only file on).

Each test here stops, freezes (SIGSTOP) or restarts its own server, so the
shared session server of ``conftest.py`` is never touched:

* a frozen Redis costs one call about the client timeout; then the circuit
  is open and the local tiers answer without waiting;
* the rate limiter keeps limiting locally (the default) and says so;
* deleting a voice while Redis is down answers 202 with the purge pending,
  and once Redis is back no cached audio of the voice is left in it (before:
  500, and the entries survived with their 24 h TTL).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis

from voxclone.devserver import free_loopback_port

pytestmark = [pytest.mark.redis, pytest.mark.timed]

TIMEOUT_S = 0.3
SLACK_S = 0.7  # scheduling noise on a loaded 2-core machine


class PrivateRedis:
    """One redis-server process this test may stop, freeze and restart."""

    def __init__(self, workdir: Path) -> None:
        self.binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(self.binary).exists():
            pytest.skip("redis-server is not installed")
        self.workdir = workdir
        self.port = free_loopback_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                str(self.workdir),
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        probe = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 15
        while True:
            try:
                if probe.ping():
                    break
            except redis.RedisError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("private redis-server did not start") from None
                time.sleep(0.05)
        probe.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def freeze(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)


@pytest.fixture()
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path / "redis")
    server.workdir.mkdir()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def timed(fn: Callable[[], Any], limit_s: float = 10.0) -> tuple[Any, float]:
    """Run ``fn`` in a thread; fail (instead of hanging the suite) past ``limit_s``."""
    box: dict[str, Any] = {}

    def run() -> None:
        started = time.perf_counter()
        try:
            box["value"] = fn()
        except BaseException as exc:  # reported to the test below
            box["error"] = exc
        box["seconds"] = time.perf_counter() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"call still blocked after {limit_s} s (no Redis timeout)"
    if "error" in box:
        raise box["error"]
    return box.get("value"), box["seconds"]


def test_frozen_redis_costs_one_timeout_then_local_tiers_serve(
    private_redis: PrivateRedis, tmp_path: Path
) -> None:
    from voxclone.bootstrap import build_cache
    from voxclone.config import Settings

    settings = Settings(
        home=tmp_path / "home",
        redis_url=private_redis.url,
        redis_timeout_s=TIMEOUT_S,
        redis_breaker_cooldown_s=30.0,
        disk_cache_mb=0,
    )
    cache = build_cache(settings)
    assert cache is not None
    cache.put("known", b"A" * 100, voice_id="alice")
    private_redis.freeze()
    try:
        missed, first_s = timed(lambda: cache.get_entry("unknown-0"))
        assert missed is None
        assert first_s < TIMEOUT_S + SLACK_S, first_s
        # Circuit open: later misses do not wait for Redis again.
        _, next_s = timed(lambda: [cache.get_entry(f"unknown-{i}") for i in range(1, 21)])
        assert next_s < 0.2, next_s
        hit, hit_s = timed(lambda: cache.get_entry("known"))
        assert hit is not None and hit[1] == "memory" and hit_s < 0.1
        _, put_s = timed(lambda: cache.put("fresh", b"B" * 100, voice_id="bob"))
        assert put_s < 0.1, put_s
        fresh = cache.get_entry("fresh")
        assert fresh is not None and fresh[1] == "memory"
    finally:
        private_redis.thaw()


@pytest.mark.parametrize("mode", ["local", "fail-open"])
def test_rate_limiter_without_redis_follows_its_setting_and_says_so(
    private_redis: PrivateRedis, tmp_path: Path, mode: str
) -> None:
    from voxclone.api.auth import rate_limiter_status
    from voxclone.bootstrap import build_rate_limiter
    from voxclone.config import Settings

    settings = Settings(
        home=tmp_path / "home",
        redis_url=private_redis.url,
        redis_timeout_s=TIMEOUT_S,
        rate_limit_per_minute=6,
        rate_limit_burst=2,
        rate_limit_without_redis=mode,
    )
    limiter = build_rate_limiter(settings)
    assert limiter is not None
    assert limiter.check("ok").allowed  # Redis answers: the shared bucket
    assert rate_limiter_status(limiter)["redis"] == "ok"
    private_redis.freeze()
    try:
        decisions, seconds = timed(lambda: [limiter.check("k").allowed for _ in range(3)])
        assert seconds < TIMEOUT_S + SLACK_S, seconds  # one timeout, then the breaker
        status = rate_limiter_status(limiter)
        assert status["redis"] == "unreachable" and status["without_redis"] == mode
        assert status["decisions_without_redis"] == 3
        if mode == "local":
            assert decisions == [True, True, False]  # burst of 2, still enforced
        else:
            assert decisions == [True, True, True]
    finally:
        private_redis.thaw()


# ---------------------------------------------------------------- voice deletion


@pytest.fixture(scope="module")
def redis_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("redis-delete")


def _voice_entries(client: redis.Redis, voice_id: str) -> list[bytes]:
    found = []
    for key in client.scan_iter(match="voxclone:audio:e:*"):
        if client.hget(key, "voice") == voice_id.encode():
            found.append(key)
    return found


@pytest.mark.models
@pytest.mark.parametrize("outage", ["stopped", "frozen"])
def test_voice_deleted_while_redis_is_down_is_purged_when_it_returns(
    private_redis: PrivateRedis, tmp_path: Path, outage: str
) -> None:
    from fastapi.testclient import TestClient

    from voxclone.api.app import create_app
    from voxclone.api.auth import LOCAL_OWNER
    from voxclone.bootstrap import build_runtime
    from voxclone.config import Settings
    from voxclone.runtime.voice_store import ConsentRecord, VoiceRecord

    settings = Settings(
        home=tmp_path / "home",
        redis_url=private_redis.url,
        redis_timeout_s=TIMEOUT_S,
        redis_breaker_cooldown_s=0.5,
        purge_retry_s=0.5,
        warm_cloning=False,
        rate_limit_per_minute=0,
    )
    runtime = build_runtime(settings, warmup=False)
    try:
        default = runtime.speech.default_voice(runtime.speech.default_engine)
        assert default is not None
        builtin = runtime.catalog.resolve(default, None)
        voice = runtime.voice_store.create(
            VoiceRecord(
                id="",
                name="Doomed",
                language="en-us",
                owner=LOCAL_OWNER,
                created_at="",
                updated_at="",
                version=0,
                consent=ConsentRecord(
                    statement_sha256="0" * 64,
                    given_by=LOCAL_OWNER,
                    given_at="2026-01-01T00:00:00Z",
                    client_address="127.0.0.1",
                ),
                embedding=np.zeros(256, np.float32),
                style=np.asarray(builtin.style, np.float32).reshape(510, 1, 256),
                quality={},
                source="instant",
            )
        )
        app = create_app(settings, runtime=runtime)
        with TestClient(app, raise_server_exceptions=False, base_url="http://127.0.0.1") as api:
            for text in ("One.", "Two.", "Three."):
                spoken = api.post("/v1/tts", json={"text": text, "voice": voice.id})
                assert spoken.status_code == 200, spoken.text
            watcher = private_redis.client()
            assert len(_voice_entries(watcher, voice.id)) == 3
            watcher.close()

            if outage == "stopped":
                private_redis.stop()
            else:
                private_redis.freeze()
            started = time.perf_counter()
            deleted = api.delete(f"/v1/voices/{voice.id}")
            delete_s = time.perf_counter() - started
            assert deleted.status_code == 202, deleted.text
            body = deleted.json()
            assert (body["id"], body["deleted"], body["purge"]) == (voice.id, True, "pending")
            # Its receipt says the cache purge is still owed (issue 49).
            assert body["receipt"]["receipt"]["erased"]["cache_purge"] == "pending"
            assert delete_s < TIMEOUT_S + SLACK_S + 1.0, delete_s
            assert api.get(f"/v1/voices/{voice.id}").status_code == 404
            ready = api.get("/readyz").json()
            assert ready["detail"]["purges_pending"] == 1

            if outage == "stopped":
                private_redis.start()  # same port and directory: the AOF brings entries back
            else:
                private_redis.thaw()
            watcher = private_redis.client()
            deadline = time.monotonic() + 15
            while _voice_entries(watcher, voice.id) or runtime.voice_store.pending_purges():
                assert time.monotonic() < deadline, (
                    _voice_entries(watcher, voice.id),
                    runtime.voice_store.pending_purges(),
                )
                time.sleep(0.2)
            watcher.close()
            assert api.get("/readyz").json()["detail"]["purges_pending"] == 0
    finally:
        runtime.close()
