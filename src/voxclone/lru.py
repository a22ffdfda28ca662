"""One least-recently-used map for every bounded cache in voxclone.

Bounded by a number of entries, a total weight (e.g. bytes), or both. It is
not thread-safe on purpose: every user keeps other state in step with it
(counters, a per-voice index, files on disk) and already holds its own lock
around both.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """Keys ordered from least to most recently used.

    ``max_entries``: at most that many entries. ``max_weight`` with ``weigh``:
    the weights of the entries add up to at most that much. :meth:`put` evicts
    the least recently used entries past either bound and returns them, so the
    caller can clean up after them.
    """

    def __init__(
        self,
        max_entries: int | None = None,
        *,
        max_weight: int | None = None,
        weigh: Callable[[V], int] | None = None,
    ) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        if (max_weight is None) != (weigh is None):
            raise ValueError("max_weight and weigh go together")
        if max_weight is not None and max_weight < 0:
            raise ValueError("max_weight must be >= 0")
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._weigh = weigh
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._weight = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def weight(self) -> int:
        """The total weight of the entries (0 without ``weigh``)."""
        return self._weight

    def __iter__(self) -> Iterator[K]:
        """Keys from least to most recently used (iterating uses none of them)."""
        return iter(self._entries)

    def get(self, key: K) -> V | None:
        """The value, now the most recently used; None when absent."""
        value = self._entries.get(key)
        if value is not None or key in self._entries:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> list[tuple[K, V]]:
        """Store ``value`` as the most recently used; return what was evicted
        (never the entry just stored, unless it alone is past a bound)."""
        self.pop(key)
        self._entries[key] = value
        if self._weigh is not None:
            self._weight += self._weigh(value)
        return self._trim()

    def pop(self, key: K) -> V | None:
        """Remove ``key``; its value, or None when absent."""
        if key not in self._entries:
            return None
        value = self._entries.pop(key)
        if self._weigh is not None:
            self._weight -= self._weigh(value)
        return value

    def _trim(self) -> list[tuple[K, V]]:
        evicted: list[tuple[K, V]] = []
        while self._entries and self._over():
            key, value = self._entries.popitem(last=False)
            if self._weigh is not None:
                self._weight -= self._weigh(value)
            evicted.append((key, value))
        return evicted

    def _over(self) -> bool:
        if self.max_entries is not None and len(self._entries) > self.max_entries:
            return True
        return self.max_weight is not None and self._weight > self.max_weight
