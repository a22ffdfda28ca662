"""Purging a deleted voice's audio from every cache tier, durably.

Deleting a voice owes a purge of everything made with it (docs/design.md §1.5).
The voice store writes that debt into its purge journal in the deletion's
own transaction; :class:`CachePurger` pays it: at once when it can, and
otherwise (Redis unreachable) on a timer and at the next start, until the
cache confirms. A journal row disappears only after a successful purge.

The journal is paid once, by whichever process gets to it first. Audio can
still be left where that purge did not reach: the other servers' own memory
and disk tiers (servers sharing a library, one home each), or a Redis entry a
render wrote back after the purge and could not take back (Redis unreachable
at that moment, service/speech/service.py). :func:`orphan_audio_purge` makes
each server, whatever its database, compare the stored voices its own tiers
hold audio of, and the recently deleted voices Redis still holds audio of,
with the library, and purge those that are gone (every ``reconcile_s``;
bootstrap.py ``build_purger`` wires it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voxclone.runtime.voice_store import PurgeJournal

log = logging.getLogger(__name__)

# Ids of voices in the library (service/catalog.py resolves "v_…" as stored
# voices); built-in voices' audio is never an orphan.
STORED_VOICE_PREFIX = "v_"


def orphan_audio_purge(
    held: Callable[[], set[str]],
    existing: Callable[[set[str]], set[str]],
    invalidate: Callable[[str], object],
) -> Callable[[], int]:
    """A pass that purges cached audio of stored voices the library no longer has.

    ``held``: voice ids the tiers hold audio of (runtime/cache_guard.py
    ``voices_held``); ``existing``: which of them the library still has;
    ``invalidate``: the purge (every tier). Returns how many voices it purged.
    """

    def reconcile() -> int:
        stored = {v for v in held() if v.startswith(STORED_VOICE_PREFIX)}
        if not stored:
            return 0
        gone = stored - existing(stored)
        for voice_id in sorted(gone):
            invalidate(voice_id)
        if gone:
            log.info("purged leftover audio of %d deleted voices", len(gone))
        return len(gone)

    return reconcile


class CachePurger:
    """Runs ``invalidate(voice_id)`` for every journaled purge until it succeeds;
    with ``reconcile``, also runs that pass every ``reconcile_s``."""

    def __init__(
        self,
        journal: PurgeJournal,
        invalidate: Callable[[str], object],
        *,
        retry_s: float = 10.0,
        reconcile: Callable[[], int] | None = None,
        reconcile_s: float = 30.0,
    ) -> None:
        self._journal = journal
        self._invalidate = invalidate
        self._retry_s = retry_s
        self._reconcile = reconcile
        self._reconcile_s = reconcile_s
        self._lock = threading.Lock()  # one purge pass at a time
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def purge(self, voice_id: str) -> bool:
        """Purge now; True when done, False when it stays journaled for a retry."""
        return self.purge_counted(voice_id) is not None

    def purge_counted(self, voice_id: str) -> int | None:
        """Purge now; how many cache entries it removed (0 when ``invalidate``
        gives no count), or None when it stays journaled for a retry. The
        count goes into the deletion's receipt (service/deletion_receipt.py)."""
        with self._lock:
            return self._attempt(voice_id)

    def _attempt(self, voice_id: str) -> int | None:
        try:
            removed = self._invalidate(voice_id)
        except Exception as exc:  # a tier unreachable: keep the debt, retry later
            log.warning("cache purge of a deleted voice postponed: %s", type(exc).__name__)
            self._journal.purge_failed(voice_id, type(exc).__name__)
            self._wake.set()
            return None
        self._journal.purge_done(voice_id)
        return removed if isinstance(removed, int) and not isinstance(removed, bool) else 0

    def pending(self) -> int:
        return len(self._journal.pending_purges())

    def run_pending(self) -> int:
        """One pass over the journal; returns how many purges are still owed."""
        with self._lock:
            left = 0
            for entry in self._journal.pending_purges():
                if self._stop.is_set():
                    break
                if self._attempt(entry.voice_id) is None:
                    left += 1
            return left

    def start(self) -> None:
        """Pay old debts now (a previous process may have left some) and keep retrying."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="voxclone-purge", daemon=True)
        self._thread.start()

    def reconcile(self) -> int:
        """One orphan pass now (0 without ``reconcile``)."""
        if self._reconcile is None:
            return 0
        with self._lock:
            return self._reconcile()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                left = self.run_pending()
            except Exception:  # the journal itself failing must not kill the thread
                log.exception("purge journal pass failed")
                left = 1
            try:
                self.reconcile()
            except Exception:  # the library or a tier unreachable: next time
                log.warning("orphan audio pass failed", exc_info=True)
            idle = max(self._retry_s, 60.0)
            if self._reconcile is not None:
                idle = min(idle, self._reconcile_s)
            if left == 0:
                # Nothing owed: sleep until a purge fails (or the periodic check).
                self._wake.wait(idle)
                self._wake.clear()
            else:
                self._stop.wait(min(self._retry_s, idle))

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
