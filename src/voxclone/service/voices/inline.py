"""Inline (per-request) reference voices: a bounded, expiring in-memory set of
clones that are never stored, their consent log, and the purge of the audio
cached with them when they expire, are evicted, or a previous process left
them behind. Cloning itself stays with the voice service."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from voxclone.runtime.inline_log import InlineLog
from voxclone.runtime.voice_store import ConsentRecord
from voxclone.service.catalog import ResolvedVoice

log = logging.getLogger(__name__)

INLINE_CACHE_ENTRIES = 32
INLINE_ID_PREFIX = "inline-"
# How often expired inline voices are looked for when no request comes.
INLINE_SWEEP_MAX_S = 60.0


class InlineVoices:
    def __init__(
        self,
        *,
        on_voice_changed: Callable[[str], None],
        inline_log: InlineLog | None,
        ttl_s: float,
        clock: Callable[[], float],
        closing: threading.Event,
    ) -> None:
        """``on_voice_changed`` drops a voice's audio from every cache tier;
        ``closing`` is the owning service's shutdown flag (stops the sweeper)."""
        self._on_voice_changed = on_voice_changed
        self._log = inline_log
        self._ttl_s = ttl_s
        self._clock = clock
        self._closing = closing
        # voice id -> (voice, unix time it expires)
        self._voices: OrderedDict[str, tuple[ResolvedVoice, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._sweeper: threading.Thread | None = None

    def find(self, voice_id: str) -> ResolvedVoice | None:
        """The live voice with this id (marked recently used), or None."""
        with self._lock:
            hit = self._voices.get(voice_id)
            if hit is None:
                return None
            self._voices.move_to_end(voice_id)
            return hit[0]

    def add(self, voice_id: str, voice: ResolvedVoice, owner: str, consent: ConsentRecord) -> None:
        """Keep ``voice`` for the TTL, its consent logged first; the least
        recently used voices beyond the bound are evicted and purged."""
        expires_at = self._clock() + self._ttl_s
        if self._log is not None:
            self._log.record(voice_id, owner, consent, expires_at)
        evicted: list[str] = []
        with self._lock:
            self._voices[voice_id] = (voice, expires_at)
            while len(self._voices) > INLINE_CACHE_ENTRIES:
                evicted.append(self._voices.popitem(last=False)[0])
        for old in evicted:
            self._purge(old)

    def ids(self) -> list[str]:
        """Ids of the inline voices alive now."""
        with self._lock:
            return list(self._voices)

    def purge_expired(self, now: float | None = None) -> list[str]:
        """Forget inline voices expired at ``now`` (default: the clock's now) and
        drop every audio cached with them."""
        now = self._clock() if now is None else now
        with self._lock:
            expired = [vid for vid, (_, until) in self._voices.items() if until <= now]
            for vid in expired:
                del self._voices[vid]
        for vid in expired:
            self._purge(vid)
        return expired

    def purge_orphaned(self) -> None:
        """Purge the audio of inline voices a previous process made and never purged."""
        if self._log is None:
            return
        for voice_id in self._log.pending():
            try:
                self._purge(voice_id)
            except Exception:  # a cache tier down at start: the next start retries
                log.exception("purging an orphaned inline voice failed")

    def start_sweeper(self) -> None:
        """Purge expired inline voices in the background, even when no request comes."""
        if self._sweeper is not None:
            return
        interval = max(1.0, min(INLINE_SWEEP_MAX_S, self._ttl_s / 4))

        def sweep() -> None:
            while not self._closing.wait(interval):
                try:
                    self.purge_expired()
                except Exception:  # the next sweep retries; never kill the thread
                    log.exception("purging expired inline voices failed")

        self._sweeper = threading.Thread(target=sweep, name="inline-sweeper", daemon=True)
        self._sweeper.start()

    def close(self) -> None:
        """After the owner's ``closing`` is set: wait for the sweeper, close the log."""
        if self._sweeper is not None:
            self._sweeper.join(timeout=5)
        if self._log is not None:
            self._log.close()

    def _purge(self, voice_id: str) -> None:
        # The same path as a deleted voice: every cache tier drops its audio.
        self._on_voice_changed(voice_id)
        if self._log is not None:
            self._log.mark_purged(voice_id)
