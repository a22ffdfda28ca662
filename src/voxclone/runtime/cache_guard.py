"""Audio of a deleted voice never outlives its purge in a cache tier.

A voice is biometric data: deleting it purges every clip made with it from
every tier (service/purge.py). A render running at that moment writes its
clip, checks the voice and takes the write back if it is gone
(``SpeechService._keep``, service/speech/service.py). What a take-back
against an unreachable Redis leaves is found here: :class:`DeletedVoices`
keeps the ids of recently deleted voices in Redis (shared by every replica)
for as long as a Redis entry can live, so the orphan sweep finds that audio,
whichever database each server uses (:func:`voices_held`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from voxclone.runtime.cache import RedisTier, TieredCache


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
