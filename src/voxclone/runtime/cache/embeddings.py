"""Speaker embeddings already computed, keyed by the audio they came from."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from voxclone.lru import Lru
from voxclone.runtime.cache.entries import (
    TierCounters,
    counter_stats,
)


class EmbeddingCache:
    """Bounded LRU of speaker embeddings keyed by a hash of the source content.

    Stored arrays are read-only copies, so a caller mutating its result cannot
    corrupt what later callers receive.
    """

    def __init__(self, max_entries: int = 1024) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self.counters = TierCounters()
        self._entries: Lru[str, NDArray[Any]] = Lru(max_entries)
        self._lock = threading.Lock()

    @staticmethod
    def content_key(content: bytes, *, model: str = "") -> str:
        """Key for ``content`` (e.g. decoded reference audio) under a given encoder."""
        digest = hashlib.sha256(model.encode("utf-8") + b"\0" + content)
        return digest.hexdigest()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> NDArray[Any] | None:
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.counters.misses += 1
                return None
            self.counters.hits += 1
            return value

    def put(self, key: str, embedding: NDArray[Any]) -> NDArray[Any]:
        """Store a read-only copy of ``embedding`` and return that copy."""
        frozen = np.array(embedding, copy=True)
        frozen.setflags(write=False)
        with self._lock:
            evicted = self._entries.put(key, frozen)
            self.counters.stores += 1
            self.counters.evictions += len(evicted)
        return frozen

    def get_or_compute(self, key: str, compute: Callable[[], NDArray[Any]]) -> NDArray[Any]:
        cached = self.get(key)
        if cached is not None:
            return cached
        return self.put(key, compute())

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {**counter_stats(self.counters), "entries": len(self._entries)}
