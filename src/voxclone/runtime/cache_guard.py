"""Audio of a deleted voice never outlives its purge in a cache tier.

A voice is biometric data: deleting it purges every clip made with it from
every tier (service/purge.py). A render already running at that moment used
to finish afterwards and write its clip back into memory, disk and Redis,
where nothing would ever remove it. Two pieces close that:

* :func:`put_while_current`, the only way a render stores its audio: write,
  then check the voice, then take the write back if the voice is gone.
* :class:`DeletedVoices`: the ids of recently deleted voices, kept in Redis
  (shared by every replica) for as long as a Redis entry can live, so the
  orphan sweep finds audio a failed take-back left in Redis, whichever
  database each server uses (:func:`voices_held`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from voxclone.runtime.cache import RedisTier, TieredCache

log = logging.getLogger(__name__)

StillCurrent = Callable[[str, int], bool]
"""``still_current(voice_id, version)``: is the voice still in the library at
that version? A store read (service/catalog.py ``VoiceCatalog.is_current``)."""


def put_while_current(
    cache: TieredCache,
    key: str,
    data: bytes,
    *,
    voice_id: str,
    version: int,
    content_type: str,
    still_current: StillCurrent,
) -> bool:
    """Store ``data`` under ``key`` in every tier, keep it only while the voice
    exists at ``version``; True when it was kept.

    Why nothing survives, whatever the order. Deleting a voice (or changing
    its version) is two steps: (D1) its library row goes (committed), then
    (D2) every tier drops every entry indexed under the voice id (journaled,
    retried until it succeeds). A render here is three: (R1) the write to
    every tier, indexed under the voice id, (R2) a store read of the voice's
    version, (R3) when it is gone or changed, the delete of ``key`` from every
    tier. If R2 comes before D1, then R1 < R2 < D1 < D2: the write is complete
    and indexed before the purge starts, so the purge removes it. If R2 comes
    after D1, R2 sees the row gone (or the new version) and R3 removes it.
    A read that fails counts as gone: a lost cache entry costs one render,
    a kept one a user's deleted voice.

    R3 against an unreachable Redis only logs (the tier's ``delete``); the
    entry is still indexed under the voice, and the orphan sweep removes it
    once Redis answers (the voice's id is in :class:`DeletedVoices`). An old
    version's clip left that way is never served (the key holds the version)
    and expires with the Redis TTL.
    """
    cache.put(key, data, voice_id=voice_id, content_type=content_type)
    try:
        current = still_current(voice_id, version)
    except Exception:
        log.warning("voice check after a cache write failed; not keeping the audio", exc_info=True)
        current = False
    if current:
        return True
    cache.delete(key, voice_id)
    log.info("audio of a voice deleted or changed during its render was not kept")
    return False


def redis_tier(cache: TieredCache | None) -> RedisTier | None:
    """The cache's Redis tier, if it has one."""
    if cache is None:
        return None
    return next((tier for tier in cache.tiers if isinstance(tier, RedisTier)), None)


class DeletedVoices:
    """Ids of voices deleted in the last ``ttl_s`` (the Redis entries' TTL),
    as one sorted set in Redis scored by when each id may be forgotten.

    Written by the journaled purge (so a Redis outage delays it, never loses
    it); read by every server's orphan sweep. A Redis entry written after the
    purge lives at most ``ttl_s`` and the sweep runs every few seconds, so
    the id is remembered for as long as such an entry can matter. Only ids
    are kept, never audio. Unlike comparing Redis's voices with the library,
    this is right even when servers with separate libraries (their own
    SQLite files) share one Redis: they never purge each other's voices.
    """

    def __init__(self, tier: RedisTier, clock: Callable[[], float] = time.time) -> None:
        self._tier = tier
        self._client: Any = tier.client
        self._key = f"{tier.prefix}deleted"
        self._ttl_s = tier.ttl_s
        self._clock = clock

    @classmethod
    def of(cls, cache: TieredCache | None) -> DeletedVoices | None:
        tier = redis_tier(cache)
        return None if tier is None else cls(tier)

    def record(self, voice_id: str) -> None:
        """Remember ``voice_id`` as deleted; raises when Redis is unreachable
        (the purge that calls this stays owed and is retried)."""
        now = self._clock()
        pipe = self._client.pipeline(transaction=True)
        pipe.zadd(self._key, {voice_id: now + self._ttl_s})
        pipe.zremrangebyscore(self._key, "-inf", now)  # the long forgotten
        pipe.expire(self._key, self._ttl_s)
        pipe.execute()

    def recent(self) -> set[str]:
        """Every voice deleted within the last ``ttl_s``."""
        found = self._client.zrangebyscore(self._key, self._clock(), "+inf")
        return {raw.decode("utf-8") if isinstance(raw, bytes) else str(raw) for raw in found}

    def with_audio(self) -> set[str]:
        """Recently deleted voices that Redis still indexes audio of."""
        deleted = sorted(self.recent())
        if not deleted:
            return set()
        pipe = self._client.pipeline(transaction=False)
        for voice_id in deleted:
            pipe.exists(self._tier.voice_index_key(voice_id))
        return {voice_id for voice_id, n in zip(deleted, pipe.execute(), strict=True) if n}


def voices_held(cache: TieredCache, deleted: DeletedVoices | None) -> Callable[[], set[str]]:
    """What the orphan sweep looks at (service/purge.py ``orphan_audio_purge``):
    the voices this process's memory and disk tiers hold audio of, and the
    recently deleted voices Redis still holds audio of."""

    def held() -> set[str]:
        found = cache.local_voice_ids()
        if deleted is not None:
            found |= deleted.with_audio()
        return found

    return held
