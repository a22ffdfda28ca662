"""What every tier stores (:class:`CacheEntry`), counts (:class:`TierCounters`)
and answers to (:class:`CacheTier`).

Hit/miss counting is reported through a plain callback so the cache stays free
of any metrics library; ``Metrics.cache_event`` fits :data:`CacheListener`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

DEFAULT_CONTENT_TYPE = "application/octet-stream"

CacheListener = Callable[[str, str], None]
"""Called as ``listener(tier_name, outcome)`` with outcome ``"hit"`` or ``"miss"``."""


@dataclass(frozen=True)
class CacheEntry:
    data: bytes
    content_type: str = DEFAULT_CONTENT_TYPE
    voice_id: str | None = None

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass
class TierCounters:
    hits: int = 0
    misses: int = 0
    stores: int = 0
    evictions: int = 0
    skipped: int = 0  # values refused (over the tier's size limit)
    errors: int = 0  # corrupt files, unreachable Redis: served as misses


class CacheTier(Protocol):
    name: str
    counters: TierCounters

    def get(self, key: str) -> CacheEntry | None: ...

    def put(self, key: str, entry: CacheEntry) -> bool: ...

    def delete(self, key: str, voice_id: str | None = None) -> None:
        """Remove ``key``; ``voice_id``: the voice it was made with, whose
        index must not keep pointing at it."""
        ...

    def invalidate_voice(self, voice_id: str) -> int: ...

    def stats(self) -> dict[str, Any]: ...


def counter_stats(counters: TierCounters) -> dict[str, Any]:
    return {
        "hits": counters.hits,
        "misses": counters.misses,
        "stores": counters.stores,
        "evictions": counters.evictions,
        "skipped": counters.skipped,
        "errors": counters.errors,
    }
