"""Deletion receipts kept for their owner to fetch once (issue 49).

The DELETE response carries the receipt; this box is the second chance (a
client that lost the response): ``GET /v1/receipts/{id}`` hands it to its
owner once, then it is gone. Kept in this process's memory, never on disk: a
receipt names what was erased, and keeping it in the database would be one
more record of a deleted voice. So it does not survive a restart and is not
shared between replicas (the DELETE response is the receipt of record).
Entries expire after ``ttl_s`` and at most ``max_entries`` are held (oldest
dropped first), so a deletion flood cannot grow memory without bound.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

DEFAULT_TTL_S = 24 * 3600.0
DEFAULT_MAX_ENTRIES = 10_000


class ReceiptBox:
    def __init__(
        self,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = ttl_s
        self._max = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        # receipt id -> (owner, document, expires at)
        self._entries: OrderedDict[str, tuple[str, dict[str, Any], float]] = OrderedDict()

    def put(self, receipt_id: str, owner: str, document: dict[str, Any]) -> None:
        with self._lock:
            self._expire()
            self._entries[receipt_id] = (owner, document, self._clock() + self._ttl_s)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def take(self, receipt_id: str, owner: str) -> dict[str, Any] | None:
        """The receipt, removed; None when missing, expired, fetched before or
        another owner's (the caller answers 404 for all alike)."""
        with self._lock:
            self._expire()
            found = self._entries.get(receipt_id)
            if found is None or found[0] != owner:
                return None
            del self._entries[receipt_id]
            return found[1]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _expire(self) -> None:
        now = self._clock()
        while self._entries:
            first = next(iter(self._entries.values()))
            if first[2] > now:
                break
            self._entries.popitem(last=False)
