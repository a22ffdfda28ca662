"""The memory tier: this process's fastest copies, bounded by their bytes."""

from __future__ import annotations

import threading
from typing import Any

from voxclone.lru import Lru
from voxclone.runtime.cache.entries import (
    CacheEntry,
    TierCounters,
    counter_stats,
)


class MemoryTier:
    """Thread-safe LRU bounded by the total size of the stored audio bytes."""

    name = "memory"

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self.counters = TierCounters()
        self._entries: Lru[str, CacheEntry] = Lru(max_weight=max_bytes, weigh=_entry_size)
        self._by_voice: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes_used(self) -> int:
        return self._entries.weight

    def keys(self) -> list[str]:
        """Keys from least to most recently used."""
        with self._lock:
            return list(self._entries)

    def get(self, key: str) -> CacheEntry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.counters.misses += 1
                return None
            self.counters.hits += 1
            return entry

    def put(self, key: str, entry: CacheEntry) -> bool:
        if entry.size > self.max_bytes:
            self.counters.skipped += 1
            return False
        with self._lock:
            self._remove_locked(key)
            evicted = self._entries.put(key, entry)
            if entry.voice_id is not None:
                self._by_voice.setdefault(entry.voice_id, set()).add(key)
            self.counters.stores += 1
            for old_key, old in evicted:
                self._unindex(old_key, old)
                self.counters.evictions += 1
            return True

    def delete(self, key: str, voice_id: str | None = None) -> None:
        with self._lock:
            self._remove_locked(key)  # the voice index follows the entry

    def voice_ids(self) -> set[str]:
        """Voices that entries here were made with."""
        with self._lock:
            return set(self._by_voice)

    def invalidate_voice(self, voice_id: str) -> int:
        with self._lock:
            keys = self._by_voice.pop(voice_id, set())
            for key in keys:
                self._remove_locked(key)
            return len(keys)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                **counter_stats(self.counters),
                "entries": len(self._entries),
                "bytes": self._entries.weight,
                "max_bytes": self.max_bytes,
            }

    def _remove_locked(self, key: str) -> None:
        entry = self._entries.pop(key)
        if entry is not None:
            self._unindex(key, entry)

    def _unindex(self, key: str, entry: CacheEntry) -> None:
        if entry.voice_id is not None:
            keys = self._by_voice.get(entry.voice_id)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_voice[entry.voice_id]


def _entry_size(entry: CacheEntry) -> int:
    return entry.size
