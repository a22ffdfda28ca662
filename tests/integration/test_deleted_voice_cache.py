"""A voice deleted while audio is being made with it leaves nothing in any cache tier.

The probe's case: ``DELETE /v1/voices/v_…`` at +2.5 s of a 6.8 s render, and
the render's audio was written to Redis and the disk cache after the purge
(still there 39 minutes later). Here the same interleaving, exactly: the
engine is held inside its call, the voice is deleted through the voice
service's own path (the one ``DELETE /v1/voices/{id}`` takes: rows, then the
journaled purge of every tier), then the engine is let go; then memory, disk
(a fresh process's view of the directory) and Redis (every entry's metadata)
are scanned for anything made with the voice.

Everything is real (SQLite library, scheduler, text frontend, memory/disk/
Redis tiers, purge journal) except the engine and its phonemizer: what is
tested is when the cache is written, not the audio.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from fakes import FakeEngine, voice_record

from voxclone.bootstrap import build_purger
from voxclone.runtime.cache import (
    CacheEntry,
    DiskTier,
    MemoryTier,
    RedisTier,
    TieredCache,
    voice_tag,
)
from voxclone.runtime.db import open_database, sqlite_url
from voxclone.runtime.job_store import JobEvents, SqlJobStore
from voxclone.runtime.redis_conn import connect
from voxclone.runtime.scheduler import Scheduler
from voxclone.runtime.voice_store import SqlVoiceStore
from voxclone.service.catalog import VoiceCatalog
from voxclone.service.purge import CachePurger
from voxclone.service.speech.router import SpeechRouter
from voxclone.service.speech.service import SpeechRequest, SpeechService
from voxclone.service.voices.service import VoiceService
from voxclone.service.voices.setup import CloningKit, VoiceHooks, VoiceStores
from voxclone.synth.engine.base import EngineCapabilities, EngineVoice
from voxclone.synth.text.frontend import TextFrontend

pytestmark = pytest.mark.redis

OWNER = "tenant-a"
WAIT_S = 20.0
STYLE_SHAPE = (510, 1, 256)
CAPS = EngineCapabilities(
    engine="fake",
    model_id="fake-1",
    model_version="0",
    sample_rate=24_000,
    max_tokens=510,
    native_batching=False,
    languages=("en-us",),
    style_shape=STYLE_SHAPE,
)


class LetterG2P:
    """Phonemes are the letters themselves: enough for the real frontend to plan."""

    languages = ("en-us",)

    def phonemize(self, text: str, language: str) -> str:
        return "".join(c for c in text.lower() if c.isalpha() or c == " ")

    def token_ids(self, phonemes: str) -> tuple[int, ...]:
        return tuple(1 + (ord(c) % 100) for c in phonemes)


# This test's voices: OWNER's, made for the fake engine.
record = partial(voice_record, owner=OWNER, engine=CAPS.engine, model_id=CAPS.model_id)


@dataclass
class Server:
    """One server process's worth of the composition root (bootstrap.py's wiring)."""

    engine: FakeEngine
    store: SqlVoiceStore
    cache: TieredCache
    speech: SpeechService
    router: SpeechRouter
    voices: VoiceService
    purger: CachePurger
    disk_root: Path
    client: redis.Redis


@pytest.fixture()
def redis_client(redis_server: str) -> Iterator[redis.Redis]:
    client = connect(redis_server)
    client.flushdb()
    yield client
    client.close()


def _server(
    database: str, disk_root: Path, client: redis.Redis
) -> tuple[Server, Callable[[], None]]:
    db = open_database(database)
    store = SqlVoiceStore(db, style_shapes={CAPS.engine: STYLE_SHAPE})
    jobs = SqlJobStore(db)
    cache = TieredCache(
        [
            MemoryTier(1 << 22),
            DiskTier(disk_root, 1 << 24),
            RedisTier(client, ttl_s=3600, max_value_bytes=1 << 22),
        ]
    )
    # Its calls wait on ``gate``: a render held at will, mid-way.
    plain = EngineVoice("plain", "a built-in", style=np.zeros(STYLE_SHAPE, "f4"))
    engine = FakeEngine(
        capabilities=CAPS, voices={"plain": plain}, samples=2400, level=0.1, wait_s=WAIT_S
    )
    as_engine = engine.as_engine()
    scheduler = Scheduler(as_engine, workers=1, queue_size=16)
    catalog = VoiceCatalog({CAPS.engine: as_engine}, store)
    speech = SpeechService(
        frontend=TextFrontend(LetterG2P(), max_tokens=CAPS.max_tokens),
        catalog=catalog,
        scheduler=scheduler,
        capabilities=CAPS,
        cache=cache,
        default_voice="plain",
    )
    router = SpeechRouter({CAPS.engine: speech}, catalog)
    purger = build_purger(store, cache, router.invalidate_voice)  # as build_runtime wires it
    voices = VoiceService(  # nothing here clones: no cloning kit
        VoiceStores(voices=store, jobs=jobs, job_events=JobEvents()),
        CloningKit(),
        VoiceHooks(on_voice_changed=router.invalidate_voice, purge=purger.purge),
    )
    server = Server(engine, store, cache, speech, router, voices, purger, disk_root, client)

    def close() -> None:
        engine.gate.set()
        voices.close()
        purger.close()
        scheduler.close()
        jobs.close()
        store.close()
        db.close()

    return server, close


@pytest.fixture()
def server(tmp_path: Path, redis_client: redis.Redis) -> Iterator[Server]:
    made, close = _server(
        sqlite_url(tmp_path / "voxclone.sqlite3"), tmp_path / "disk", redis_client
    )
    yield made
    close()


def held_by(server: Server, voice_id: str) -> dict[str, Any]:
    """Everything any tier holds that was made with ``voice_id``."""
    memory = next(t for t in server.cache.tiers if isinstance(t, MemoryTier))
    redis_entries = [
        key
        for key in server.client.scan_iter(match="voxclone:audio:e:*", count=1000)
        if server.client.hget(key, "voice") == voice_id.encode()
    ]
    return {
        "memory": voice_id in memory.voice_ids(),
        # A fresh tier on the directory: what another process or a restart finds.
        "disk": voice_id in DiskTier(server.disk_root, 1 << 24).voice_ids(),
        "redis entries": redis_entries,
        "redis index": server.client.exists(f"voxclone:audio:v:{voice_tag(voice_id)}") > 0,
    }


NOTHING: dict[str, Any] = {
    "memory": False,
    "disk": False,
    "redis entries": [],
    "redis index": False,
}


def _in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:  # reported by the test
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _request(voice_id: str, text: str = "Hello there, this is a held render.") -> SpeechRequest:
    return SpeechRequest(text=text, voice=voice_id, language="en-us", owner=OWNER)


def _render_while(
    server: Server, render: Callable[[], object], meanwhile: Callable[[], object]
) -> object:
    """Start ``render`` with the engine held, run ``meanwhile``, let the engine go."""
    server.engine.gate.clear()
    server.engine.entered.clear()
    thread, out = _in_thread(render)
    assert server.engine.entered.wait(WAIT_S), "the render never reached the engine"
    meanwhile()
    server.engine.gate.set()
    thread.join(WAIT_S)
    assert not thread.is_alive() and len(out) == 1
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def test_a_file_rendered_through_its_voices_deletion_is_not_cached(server: Server) -> None:
    voice = server.store.create(record("Alice"))
    kept = server.store.create(record("Kept", seed=1))
    # A control: the same render of a voice that stays is cached everywhere.
    server.speech.synthesize(_request(kept.id))
    assert held_by(server, kept.id)["memory"] and held_by(server, kept.id)["redis entries"]

    result = _render_while(
        server,
        lambda: server.speech.synthesize(_request(voice.id)),
        lambda: server.voices.delete(voice.id, OWNER),
    )

    assert getattr(result, "cache", None) == "miss" and len(getattr(result, "audio", b"")) > 44
    assert held_by(server, voice.id) == NOTHING
    assert held_by(server, kept.id)["redis entries"]  # the other voice's audio stays
    assert server.purger.pending() == 0


def test_a_stream_rendered_through_its_voices_deletion_is_not_cached(server: Server) -> None:
    voice = server.store.create(record("Bob"))

    def stream() -> bytes:
        _, chunks = server.speech.stream(_request(voice.id))
        return b"".join(chunks)

    audio = _render_while(server, stream, lambda: server.voices.delete(voice.id, OWNER))

    assert isinstance(audio, bytes) and len(audio) > 44
    assert held_by(server, voice.id) == NOTHING


def test_a_render_of_an_older_version_is_not_cached(server: Server) -> None:
    voice = server.store.create(record("Carol"))

    def new_version() -> None:
        # What adding a recording does: a new style (version 2), then every
        # tier drops the voice's audio.
        server.store.update_style(
            voice.id, OWNER, style=np.ones(STYLE_SHAPE, "f4"), quality={}, source="instant"
        )
        server.router.invalidate_voice(voice.id)

    _render_while(server, lambda: server.speech.synthesize(_request(voice.id)), new_version)

    assert held_by(server, voice.id) == NOTHING
    # Version 2 renders and is cached as usual.
    server.speech.synthesize(_request(voice.id))
    assert held_by(server, voice.id)["memory"] and held_by(server, voice.id)["redis entries"]


def test_a_deletion_between_the_write_and_the_check_leaves_nothing(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other order: the write lands, then the voice is deleted and purged,
    then the render checks the voice (the purge removes the write; the check
    must not bring anything back)."""
    voice = server.store.create(record("Dave"))
    real_put = TieredCache.put

    def put_then_delete(self: TieredCache, key: str, value: bytes, *args: Any, **kw: Any) -> None:
        real_put(self, key, value, *args, **kw)
        server.voices.delete(voice.id, OWNER)

    monkeypatch.setattr(TieredCache, "put", put_then_delete)
    server.speech.synthesize(_request(voice.id))
    monkeypatch.undo()

    assert held_by(server, voice.id) == NOTHING


def test_a_hit_copied_up_from_redis_across_a_deletion_is_not_kept(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory/disk miss read from Redis before the purge and copied into the
    faster tiers after it."""
    voice = server.store.create(record("Erin"))
    request = _request(voice.id)
    server.speech.synthesize(request)
    for tier in server.cache.tiers[:2]:  # only Redis has it now
        tier.invalidate_voice(voice.id)
    redis_tier = server.cache.tiers[2]
    real_get = RedisTier.get

    def get_then_delete(self: RedisTier, key: str) -> Any:
        found = real_get(self, key)
        monkeypatch.setattr(RedisTier, "get", real_get)
        server.voices.delete(voice.id, OWNER)
        return found

    monkeypatch.setattr(RedisTier, "get", get_then_delete)
    hit = server.speech.synthesize(request)
    assert hit.cache == redis_tier.name  # served from what was read before the delete

    assert held_by(server, voice.id) == NOTHING


def test_a_voice_check_that_fails_keeps_nothing(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library read that fails after the write counts as a deleted voice:
    a lost entry costs one render, a kept one a user's deleted voice."""
    voice = server.store.create(record("Erin"))

    def unreadable(self: VoiceCatalog, voice_id: str, version: int) -> bool:
        raise RuntimeError("the library cannot be read")

    monkeypatch.setattr(VoiceCatalog, "is_current", unreadable)
    server.speech.synthesize(_request(voice.id))
    monkeypatch.undo()

    assert held_by(server, voice.id) == NOTHING
    assert server.store.get(voice.id, OWNER).id == voice.id  # the voice itself is still there


def test_builtin_voices_are_cached_without_a_library_check(server: Server) -> None:
    server.speech.synthesize(
        SpeechRequest(text="A built-in voice.", voice="plain", language="en-us")
    )
    assert held_by(server, "plain")["memory"] and held_by(server, "plain")["redis entries"]


# -- the orphan sweep: SQLite and Redis ---------------------------------------------


def test_the_sweep_removes_audio_of_deleted_voices_from_every_tier_with_sqlite(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    """Two servers on one SQLite library and one Redis, each with its own memory
    and disk. Audio of a deleted voice that a purge could not reach (server
    B's own tiers; a Redis entry whose take-back failed) is found and removed."""
    database = sqlite_url(tmp_path / "voxclone.sqlite3")
    a, close_a = _server(database, tmp_path / "disk-a", redis_client)
    b, close_b = _server(database, tmp_path / "disk-b", redis_client)
    try:
        gone = a.store.create(record("Gone"))
        late = a.store.create(record("Late", seed=2))
        kept = a.store.create(record("Kept", seed=1))
        for voice in (gone, kept):
            b.speech.synthesize(_request(voice.id))  # in B's tiers and Redis
        assert a.purger.reconcile() == 0 and b.purger.reconcile() == 0  # nothing gone yet

        a.voices.delete(gone.id, OWNER)  # through A: A's tiers and Redis purged
        a.voices.delete(late.id, OWNER)
        assert held_by(a, gone.id) == NOTHING and held_by(b, gone.id)["redis entries"] == []
        assert held_by(b, gone.id)["memory"]  # B's own tiers: out of A's reach
        # As if a render's take-back had failed against Redis: an entry of a
        # deleted voice written after its purge, in Redis only.
        orphan = RedisTier(redis_client, ttl_s=3600, max_value_bytes=1 << 20)
        orphan.put("late", CacheEntry(b"late audio", "audio/wav", voice_id=late.id))

        assert a.purger.reconcile() == 1  # A: Redis's (it holds nothing of them itself)
        orphan.put("late", CacheEntry(b"late audio", "audio/wav", voice_id=late.id))
        assert b.purger.reconcile() == 2  # B: its own tiers' and Redis's
        for server in (a, b):
            for voice in (gone, late):
                assert held_by(server, voice.id) == NOTHING, (server.disk_root, voice.name)
        assert held_by(b, kept.id)["memory"] and held_by(b, kept.id)["redis entries"]
        assert a.purger.reconcile() == 0 and b.purger.reconcile() == 0
    finally:
        close_a()
        close_b()


def test_a_library_never_sweeps_another_librarys_voices_from_a_shared_redis(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    """Servers with their own SQLite files sharing one Redis (docs/deploy.md:
    Redis for a shared cache across hosts): a voice one library has is not an
    orphan for the other."""
    a, close_a = _server(sqlite_url(tmp_path / "a.sqlite3"), tmp_path / "disk-a", redis_client)
    b, close_b = _server(sqlite_url(tmp_path / "b.sqlite3"), tmp_path / "disk-b", redis_client)
    try:
        mine = a.store.create(record("Mine"))
        a.speech.synthesize(_request(mine.id))
        assert b.purger.reconcile() == 0
        assert held_by(a, mine.id)["redis entries"] and held_by(a, mine.id)["memory"]
    finally:
        close_a()
        close_b()
