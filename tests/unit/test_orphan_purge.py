"""Servers sharing a library purge their own cached audio of voices deleted elsewhere.

Two servers, one database (the suite runs on SQLite and PostgreSQL), one home
each: server A deletes a voice and pays the purge journal with its own tiers;
server B's memory and disk tiers would keep that voice's audio forever unless
B notices the voice is gone.
"""

from __future__ import annotations

from pathlib import Path

from fakes import voice_record
from test_voice_store import SHAPES

from voxclone.runtime.cache import DiskTier, MemoryTier, TieredCache, cache_key
from voxclone.runtime.voice_store import PendingPurge, SqlVoiceStore
from voxclone.service.purge import CachePurger, orphan_audio_purge


def _cache(root: Path) -> TieredCache:
    return TieredCache([MemoryTier(1 << 20), DiskTier(root, 1 << 20)])


def _put(cache: TieredCache, voice_id: str, text: str) -> str:
    key = cache_key(voice=voice_id, text=text)
    cache.put(key, b"audio of " + text.encode(), voice_id=voice_id)
    return key


def test_a_voice_deleted_through_another_server_leaves_no_audio_here(
    database_url: str, tmp_path: Path
) -> None:
    with (
        SqlVoiceStore(database_url, style_shapes=SHAPES) as store_a,
        SqlVoiceStore(database_url, style_shapes=SHAPES) as store_b,
    ):
        gone = store_a.create(voice_record("Gone"))
        kept = store_a.create(voice_record("Kept", seed=1))
        cache_b = _cache(tmp_path / "b-cache")
        orphan = _put(cache_b, gone.id, "hello")
        survivor = _put(cache_b, kept.id, "hello")
        builtin = _put(cache_b, "clear_female", "hello")  # not a library voice
        purger_b = CachePurger(
            store_b,
            cache_b.invalidate_voice,
            reconcile=orphan_audio_purge(
                cache_b.local_voice_ids, store_b.existing_voice_ids, cache_b.invalidate_voice
            ),
        )
        assert purger_b.reconcile() == 0  # nothing deleted yet: nothing touched

        store_a.delete(gone.id, owner=None)  # through server A

        assert purger_b.reconcile() == 1
        assert cache_b.get(orphan) is None
        for tier in cache_b.tiers:
            assert isinstance(tier, MemoryTier | DiskTier)
            assert gone.id not in tier.voice_ids()
        # A fresh process on B's disk finds nothing of it either.
        assert gone.id not in DiskTier(tmp_path / "b-cache", 1 << 20).voice_ids()
        assert cache_b.get(survivor) is not None and cache_b.get(builtin) is not None
        assert purger_b.reconcile() == 0


def test_without_reconcile_the_purger_never_touches_other_voices(tmp_path: Path) -> None:
    cache = _cache(tmp_path / "cache")
    key = _put(cache, "v_unknown", "hello")
    purger = CachePurger(_NoJournal(), cache.invalidate_voice)
    assert purger.reconcile() == 0 and cache.get(key) is not None


class _NoJournal:
    def record_purge(self, voice_id: str) -> None: ...

    def pending_purges(self, limit: int = 1000) -> list[PendingPurge]:
        return []

    def purge_failed(self, voice_id: str, error: str) -> None: ...

    def purge_done(self, voice_id: str) -> None: ...


def test_the_servers_purger_sweeps_its_tiers_whatever_the_database(
    database_url: str, tmp_path: Path
) -> None:
    """bootstrap's wiring: the sweep runs with SQLite as with PostgreSQL (it
    used to run only with a database URL, so an embedded library never swept)."""
    from voxclone.bootstrap import build_purger

    with SqlVoiceStore(database_url, style_shapes=SHAPES) as store:
        gone = store.create(voice_record("Gone"))
        kept = store.create(voice_record("Kept", seed=1))
        cache = _cache(tmp_path / "cache")
        orphan = _put(cache, gone.id, "hello")
        survivor = _put(cache, kept.id, "hello")
        purger = build_purger(store, cache, cache.invalidate_voice)
        assert purger.reconcile() == 0

        store.delete(gone.id, owner=None)  # by a process whose purge never reached here

        assert purger.reconcile() == 1
        assert cache.get(orphan) is None and cache.get(survivor) is not None
        assert gone.id not in DiskTier(tmp_path / "cache", 1 << 20).voice_ids()
