"""The cache the service uses: tiers looked up fastest first, hits promoted,
voice purges across every tier.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from voxclone.runtime.cache.entries import (
    DEFAULT_CONTENT_TYPE,
    CacheEntry,
    CacheListener,
    CacheTier,
)

log = logging.getLogger(__name__)


class TieredCache:
    """Looks tiers up fastest first; a hit is copied into the faster tiers."""

    def __init__(self, tiers: Sequence[CacheTier], listener: CacheListener | None = None) -> None:
        names = [tier.name for tier in tiers]
        if len(set(names)) != len(names):
            raise ValueError("tier names must be unique")
        self.tiers = list(tiers)
        self.listener = listener
        # Voice purges running now and begun so far: a hit read before a purge
        # and copied into the faster tiers after it would outlive it (get_entry).
        self._purge_lock = threading.Lock()
        self._purges_running = 0
        self._purges_begun = 0

    def _notify(self, tier: str, outcome: str) -> None:
        if self.listener is not None:
            try:
                self.listener(tier, outcome)
            except Exception:  # metrics must never break serving
                log.exception("cache listener failed")

    def get_entry(self, key: str) -> tuple[CacheEntry, str] | None:
        with self._purge_lock:
            before = (self._purges_running, self._purges_begun)
        for position, tier in enumerate(self.tiers):
            entry = tier.get(key)
            if entry is None:
                self._notify(tier.name, "miss")
                continue
            self._notify(tier.name, "hit")
            if position:
                self._promote(key, entry, self.tiers[:position], before)
            return entry, tier.name
        return None

    def _promote(
        self, key: str, entry: CacheEntry, faster: Sequence[CacheTier], before: tuple[int, int]
    ) -> None:
        """Copy a hit into the faster tiers, unless a purge overlapped the lookup.

        A purge running when the lookup began may not have reached the slower
        tier yet (what was read may be its leftover): no copy. One that began
        after it may have cleared the faster tiers before the copy landed: the
        copy is taken back. Either way this process's own purge leaves nothing
        (another process's purge of a shared tier is the orphan sweep's job).
        """
        if before[0]:
            return
        for tier in faster:
            tier.put(key, entry)
        with self._purge_lock:
            overlapped = self._purges_begun != before[1]
        if overlapped:
            for tier in faster:
                tier.delete(key, entry.voice_id)

    def get(self, key: str) -> tuple[bytes, str] | None:
        """``(audio bytes, tier name)`` or None; see ``get_entry`` for metadata."""
        found = self.get_entry(key)
        if found is None:
            return None
        entry, tier_name = found
        return entry.data, tier_name

    def put(
        self,
        key: str,
        value: bytes,
        voice_id: str | None,
        content_type: str = DEFAULT_CONTENT_TYPE,
    ) -> None:
        entry = CacheEntry(data=bytes(value), content_type=content_type, voice_id=voice_id)
        for tier in self.tiers:
            tier.put(key, entry)

    def delete(self, key: str, voice_id: str | None = None) -> None:
        for tier in self.tiers:
            tier.delete(key, voice_id)

    def local_voice_ids(self) -> set[str]:
        """Voices this process's own tiers (memory, disk) hold audio of; a shared
        tier (Redis) is left out: the deleting server purges it (and the orphan
        sweep finds what was written after, runtime/cache_guard.py)."""
        found: set[str] = set()
        for tier in self.tiers:
            lister = getattr(tier, "voice_ids", None)
            if lister is not None:
                found |= lister()
        return found

    def invalidate_voice(self, voice_id: str) -> dict[str, int]:
        """Remove every entry made with ``voice_id``; returns removals per tier.

        Every tier is tried even when one fails (the local ones must not keep
        audio because Redis is down); then the first failure is raised, so the
        caller keeps the purge owed.
        """
        removed: dict[str, int] = {}
        failure: Exception | None = None
        with self._purge_lock:
            self._purges_running += 1
            self._purges_begun += 1
        try:
            for tier in self.tiers:
                try:
                    removed[tier.name] = tier.invalidate_voice(voice_id)
                except Exception as exc:
                    failure = failure or exc
        finally:
            with self._purge_lock:
                self._purges_running -= 1
        if failure is not None:
            raise failure
        return removed

    def stats(self) -> dict[str, dict[str, Any]]:
        return {tier.name: tier.stats() for tier in self.tiers}
