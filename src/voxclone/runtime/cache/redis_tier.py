"""The Redis tier: entries shared by every replica, with a TTL."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from voxclone.runtime.cache.entries import (
    DEFAULT_CONTENT_TYPE,
    CacheEntry,
    TierCounters,
    counter_stats,
)
from voxclone.runtime.cache.keys import voice_tag

if TYPE_CHECKING:
    from redis.exceptions import RedisError

log = logging.getLogger(__name__)


# Deleting the members and the set in one script means no entry can be added to
# the set between reading it and deleting it and then survive the invalidation.
_INVALIDATE_LUA = """
local keys = redis.call('SMEMBERS', KEYS[1])
local removed = 0
for _, k in ipairs(keys) do
  removed = removed + redis.call('DEL', k)
end
redis.call('DEL', KEYS[1])
return removed
"""


def _log_redis_error(what: str, exc: RedisError) -> None:
    # While the circuit is open every call fails at once: one line per call
    # at warning level would flood the log during an outage.
    from voxclone.runtime.redis_conn import RedisUnavailable

    if isinstance(exc, RedisUnavailable):
        log.debug("redis cache %s: %s", what, exc)
    else:
        log.warning("redis cache %s: %s", what, type(exc).__name__)


class RedisTier:
    """Entries as Redis hashes with a TTL; a SET per voice indexes them.

    Shared by every replica. Values above ``max_value_bytes`` are not stored
    (large transfers would block Redis for everyone). An unreachable Redis
    degrades to misses rather than failing the request.
    """

    name = "redis"

    def __init__(
        self,
        client: Any,
        ttl_s: int,
        max_value_bytes: int,
        prefix: str = "voxclone:audio:",
    ) -> None:
        if ttl_s <= 0:
            raise ValueError("ttl_s must be > 0")
        self.client = client
        self.ttl_s = int(ttl_s)
        self.max_value_bytes = max_value_bytes
        self.prefix = prefix
        self.counters = TierCounters()
        self._invalidate = client.register_script(_INVALIDATE_LUA)
        # Imported here, not with the module: the redis package takes ~0.7 s
        # to import on 2 cores and only a server configured with Redis needs it.
        from redis.exceptions import RedisError

        self._redis_error: type[RedisError] = RedisError

    def _entry_key(self, key: str) -> str:
        return f"{self.prefix}e:{key}"

    def _voice_key(self, voice_id: str) -> str:
        return f"{self.prefix}v:{voice_tag(voice_id)}"

    def voice_index_key(self, voice_id: str) -> str:
        """The SET indexing ``voice_id``'s entries (exists while any may be left)."""
        return self._voice_key(voice_id)

    def get(self, key: str) -> CacheEntry | None:
        try:
            fields = self.client.hgetall(self._entry_key(key))
        except self._redis_error as exc:
            _log_redis_error("read failed; serving a miss", exc)
            self.counters.errors += 1
            self.counters.misses += 1
            return None
        data = fields.get(b"data") if fields else None
        if data is None:
            self.counters.misses += 1
            return None
        self.counters.hits += 1
        content_type = fields.get(b"ct", b"").decode("utf-8") or DEFAULT_CONTENT_TYPE
        voice = fields.get(b"voice")
        return CacheEntry(
            data=bytes(data),
            content_type=content_type,
            voice_id=voice.decode("utf-8") if voice else None,
        )

    def put(self, key: str, entry: CacheEntry) -> bool:
        if entry.size > self.max_value_bytes:
            self.counters.skipped += 1
            return False
        entry_key = self._entry_key(key)
        mapping: dict[str, bytes | str] = {"data": entry.data, "ct": entry.content_type}
        if entry.voice_id is not None:
            mapping["voice"] = entry.voice_id
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(entry_key)
            pipe.hset(entry_key, mapping=mapping)
            pipe.expire(entry_key, self.ttl_s)
            if entry.voice_id is not None:
                voice_key = self._voice_key(entry.voice_id)
                pipe.sadd(voice_key, entry_key)
                # The index lives as long as its newest entry could.
                pipe.expire(voice_key, self.ttl_s)
            pipe.execute()
        except self._redis_error as exc:
            _log_redis_error("write failed", exc)
            self.counters.errors += 1
            return False
        self.counters.stores += 1
        return True

    def delete(self, key: str, voice_id: str | None = None) -> None:
        try:
            if voice_id is None:
                self.client.delete(self._entry_key(key))
            else:
                pipe = self.client.pipeline(transaction=True)
                pipe.delete(self._entry_key(key))
                pipe.srem(self._voice_key(voice_id), self._entry_key(key))
                pipe.execute()
        except self._redis_error as exc:
            self.counters.errors += 1
            _log_redis_error("delete failed", exc)

    def invalidate_voice(self, voice_id: str) -> int:
        # Errors propagate: a silent failure here would leave biometric-derived
        # audio behind after the user asked for deletion.
        return int(self._invalidate(keys=[self._voice_key(voice_id)]))

    def stats(self) -> dict[str, Any]:
        return {**counter_stats(self.counters), "ttl_s": self.ttl_s}
