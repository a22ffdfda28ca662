"""Tenancy and deletion on the real path: no fake services.

Two tenants hold API keys with different owners, created with the real key
store, against the FastAPI app over a runtime built by ``build_runtime`` (so
bootstrap's wiring of cache invalidation is what runs) with all three cache
tiers: memory, disk and a real Redis. Voice A is cloned with the real encoder.

What must hold (docs/design.md §1.5, privacy):
* tenant B cannot get, list, rename, refine, delete, speak with (native and
  OpenAI routes, by id and by name) or read the jobs of tenant A's voice, and
  every refusal looks like a missing voice (404), so ids cannot be probed;
* after A deletes the voice, no cache tier holds anything made with it, and a
  repeat of a request that was cached answers 404 instead of the cached audio.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.api.auth import key_db_path
from voxclone.bootstrap import Runtime, build_runtime
from voxclone.config import Settings
from voxclone.runtime.cache import DiskTier, MemoryTier, RedisTier
from voxclone.runtime.cache.disk import read_entry_voice
from voxclone.runtime.keys import SCOPE_TTS, SCOPE_VOICES_READ, SCOPE_VOICES_WRITE, KeyStore

pytestmark = [pytest.mark.models, pytest.mark.redis]

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "librispeech_3005-163389-0000.wav"
TEXT = "The quiet river runs past the mill."
SCOPES = {SCOPE_TTS, SCOPE_VOICES_READ, SCOPE_VOICES_WRITE}
# A database of its own on the session's Redis, so other tests' entries never mix in.
REDIS_DB = 7


@dataclass
class Tenants:
    runtime: Runtime
    client: TestClient
    a: dict[str, str]  # Authorization headers
    b: dict[str, str]
    voice_id: str
    voice_name: str
    redis: Any


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory, redis_server: str) -> Iterator[Tenants]:
    home = tmp_path_factory.mktemp("tenancy-home")
    redis_url = redis_server.rsplit("/", 1)[0] + f"/{REDIS_DB}"
    settings = Settings(
        home=home,
        redis_url=redis_url,
        # A refine job only needs to exist here, not to search for long.
        refine_auditions=2,
        refine_prosody_auditions=1,
        # Tenancy does not depend on the clone's pitch; skipping calibration saves renders.
        clone_pitch_calibration=False,
        # The test polls a job; the per-key limit is tested elsewhere.
        rate_limit_per_minute=60_000.0,
        rate_limit_burst=1_000.0,
    )
    runtime = build_runtime(settings, warmup=False)
    keys = KeyStore(key_db_path(home))
    key_a, _ = keys.create("tenant a", SCOPES, owner="tenant-a")
    key_b, _ = keys.create("tenant b", SCOPES, owner="tenant-b")
    keys.close()
    store = redis.Redis.from_url(redis_url)
    store.flushdb()
    try:
        with TestClient(create_app(settings, runtime=runtime)) as client:
            a = {"Authorization": f"Bearer {key_a}"}
            b = {"Authorization": f"Bearer {key_b}"}
            enrolled = client.post(
                "/v1/voices",
                headers=a,
                data={
                    "name": "Alice",
                    "consent": "true",
                    "consent_statement": "I agree that my voice is cloned.",
                },
                files={"audio": ("ref.wav", REFERENCE.read_bytes(), "audio/wav")},
            )
            assert enrolled.status_code == 201, enrolled.text
            voice = enrolled.json()
            yield Tenants(runtime, client, a, b, voice["id"], voice["name"], store)
    finally:
        store.flushdb()
        store.close()
        runtime.close()


def _tiers(runtime: Runtime) -> tuple[MemoryTier, DiskTier, RedisTier]:
    assert runtime.cache is not None
    by_type = {type(t): t for t in runtime.cache.tiers}
    memory, disk, shared = by_type[MemoryTier], by_type[DiskTier], by_type[RedisTier]
    assert isinstance(memory, MemoryTier) and isinstance(disk, DiskTier)
    assert isinstance(shared, RedisTier)
    return memory, disk, shared


def _made_with(runtime: Runtime, voice_id: str, redis_client: Any) -> dict[str, set[str]]:
    """What each tier holds that was made with ``voice_id`` (found by scanning, not by
    trusting the tiers' own per-voice indexes)."""
    memory, disk, red = _tiers(runtime)
    in_memory = set()
    held = memory.keys()  # a tier, not a dict: keys() is its listing
    for key in held:
        entry = memory.get(key)
        if entry is not None and entry.voice_id == voice_id:
            in_memory.add(key)
    on_disk = {path.name for path in disk._entry_files() if read_entry_voice(path) == voice_id}
    in_redis = set()
    for name in redis_client.scan_iter(match=f"{red.prefix}e:*"):
        if redis_client.hget(name, "voice") == voice_id.encode():
            in_redis.add(name.decode())
    return {"memory": in_memory, "disk": on_disk, "redis": in_redis}


def _speak_native(t: Tenants, headers: dict[str, str], voice: str) -> Any:
    return t.client.post("/v1/tts", headers=headers, json={"text": TEXT, "voice": voice})


def _speak_openai(t: Tenants, headers: dict[str, str], voice: str) -> Any:
    return t.client.post(
        "/v1/audio/speech",
        headers=headers,
        json={"model": "tts-1", "input": TEXT, "voice": voice, "response_format": "wav"},
    )


def _assert_missing(response: Any, what: str) -> None:
    assert response.status_code == 404, f"{what}: {response.status_code} {response.text[:200]}"
    assert response.json()["error"]["code"] == "not_found", what


def test_other_tenant_cannot_reach_the_voice_or_its_jobs(tenants: Tenants) -> None:
    t, vid = tenants, tenants.voice_id
    c = t.client
    # A sees its voice everywhere it should.
    assert c.get(f"/v1/voices/{vid}", headers=t.a).status_code == 200
    assert vid in [v["id"] for v in c.get("/v1/voices", headers=t.a).json()["voices"]]
    assert vid in [v["id"] for v in c.get("/v1/audio/voices", headers=t.a).json()["voices"]]

    # B: the voice does not exist for it, whichever route or reference it uses.
    _assert_missing(c.get(f"/v1/voices/{vid}", headers=t.b), "get")
    assert c.get("/v1/voices", headers=t.b).json()["voices"] == []
    listed_b = [v["id"] for v in c.get("/v1/audio/voices", headers=t.b).json()["voices"]]
    assert vid not in listed_b and t.voice_name not in listed_b
    _assert_missing(c.patch(f"/v1/voices/{vid}", headers=t.b, json={"name": "Mine"}), "rename")
    _assert_missing(c.post(f"/v1/voices/{vid}/refine", headers=t.b), "refine")
    _assert_missing(c.delete(f"/v1/voices/{vid}", headers=t.b), "delete")
    for voice in (vid, t.voice_name):
        _assert_missing(_speak_native(t, t.b, voice), f"/v1/tts voice={voice}")
        _assert_missing(_speak_openai(t, t.b, voice), f"/v1/audio/speech voice={voice}")
    # Nothing B tried changed A's voice.
    still = c.get(f"/v1/voices/{vid}", headers=t.a).json()
    assert still["name"] == t.voice_name and still["version"] == 1

    # Jobs: A's refine job is invisible to B (read, cancel, progress stream).
    job = c.post(f"/v1/voices/{vid}/refine", headers=t.a, json={"budget_s": 1})
    assert job.status_code == 202, job.text
    job_id = job.json()["id"]
    _assert_missing(c.get(f"/v1/jobs/{job_id}", headers=t.b), "job get")
    _assert_missing(c.post(f"/v1/jobs/{job_id}/cancel", headers=t.b), "job cancel")
    _assert_missing(c.get(f"/v1/jobs/{job_id}/events", headers=t.b), "job events")
    assert c.get(f"/v1/jobs/{job_id}", headers=t.a).status_code == 200
    c.post(f"/v1/jobs/{job_id}/cancel", headers=t.a)
    # Generous: on a shared 2-core machine one refine audition can take a minute.
    deadline = time.monotonic() + 600
    while c.get(f"/v1/jobs/{job_id}", headers=t.a).json()["state"] not in (
        "succeeded",
        "cancelled",
        "failed",
    ):
        assert time.monotonic() < deadline, "the refine job did not end"
        time.sleep(0.2)
    # Finished or not, the job stays A's alone.
    assert c.get(f"/v1/jobs/{job_id}", headers=t.b).status_code == 404


def test_delete_leaves_no_audio_in_any_cache_tier(tenants: Tenants) -> None:
    t, vid = tenants, tenants.voice_id
    c = t.client
    # A speaks with its voice on both routes, by id and by name: four cached files.
    first = {}
    for route, speak in (("native", _speak_native), ("openai", _speak_openai)):
        for voice in (vid, t.voice_name):
            r = speak(t, t.a, voice)
            assert r.status_code == 200, r.text
            first[(route, voice)] = r.content
    again = _speak_native(t, t.a, vid)
    assert again.headers["X-Cache"] != "miss" and again.content == first[("native", vid)]
    # B asking for the same text with A's voice gets no cached audio either.
    _assert_missing(_speak_native(t, t.b, vid), "B, cached request")

    held = _made_with(t.runtime, vid, t.redis)
    for tier, keys in held.items():
        assert keys, f"precondition: the {tier} tier holds audio made with the voice"

    deleted = c.delete(f"/v1/voices/{vid}", headers=t.a)
    body = deleted.json()
    # With its signed deletion receipt (issue 49).
    assert deleted.status_code == 200 and body["id"] == vid and body["deleted"] is True
    assert body["receipt"]["receipt"]["voice_id"] == vid

    assert _made_with(t.runtime, vid, t.redis) == {"memory": set(), "disk": set(), "redis": set()}
    # Each tier's own lookup of the keys it held misses too.
    memory, disk, red = _tiers(t.runtime)
    for key in held["memory"]:
        assert memory.get(key) is None and disk.get(key) is None and red.get(key) is None
    # Repeats of the cached requests are refused, not answered from a cache.
    for voice in (vid, t.voice_name):
        _assert_missing(_speak_native(t, t.a, voice), f"A after delete, voice={voice}")
        _assert_missing(_speak_openai(t, t.a, voice), f"A after delete (openai), voice={voice}")
    _assert_missing(c.get(f"/v1/voices/{vid}", headers=t.a), "get after delete")
    _assert_missing(c.delete(f"/v1/voices/{vid}", headers=t.a), "second delete")
