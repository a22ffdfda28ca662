"""The purge journal: purges of a deleted voice's derived data still owed.

Deleting a voice writes its journal row in the same transaction as the
deletion, so the voice cannot be gone without its purge owed; the row stays
until a purge of every cache tier and of the voice's blobs succeeded
(``service/purge.CachePurger`` retries it). The voice store is the journal:
:class:`~voxclone.runtime.voice_store.sql_store.SqlVoiceStore` builds on it.
"""

from __future__ import annotations

from sqlalchemy import Connection, delete, select, update

from voxclone.runtime.db import tables as t
from voxclone.runtime.db import upsert
from voxclone.runtime.db.repository import Repository
from voxclone.runtime.voice_store.records import PendingPurge, utc_now_iso


class VoicePurgeJournal(Repository):
    """Table ``purge_journal``: one row per voice whose purge is owed."""

    def record_purge(self, voice_id: str) -> None:
        """Owe a purge of the caches for ``voice_id`` (deleted voices record it themselves)."""
        with self._db.write() as conn:
            self._journal_purge(conn, voice_id)

    def _journal_purge(self, conn: Connection, voice_id: str) -> None:
        now = utc_now_iso()
        conn.execute(
            upsert(self._db, t.purge_journal)
            .values(voice_id=voice_id, requested_at=now, attempts=0)
            .on_conflict_do_update(index_elements=["voice_id"], set_={"requested_at": now})
        )

    def pending_purges(self, limit: int = 1000) -> list[PendingPurge]:
        p = t.purge_journal.c
        with self._db.read() as conn:
            rows = conn.execute(
                select(p.voice_id, p.requested_at, p.attempts, p.last_error)
                .order_by(p.requested_at, p.voice_id)
                .limit(limit)
            ).all()
        return [PendingPurge(r[0], r[1], int(r[2]), r[3]) for r in rows]

    def purge_failed(self, voice_id: str, error: str) -> None:
        p = t.purge_journal.c
        with self._db.write() as conn:
            conn.execute(
                update(t.purge_journal)
                .where(p.voice_id == voice_id)
                .values(attempts=p.attempts + 1, last_error=error[:200])
            )

    def purge_done(self, voice_id: str) -> None:
        with self._db.write() as conn:
            conn.execute(delete(t.purge_journal).where(t.purge_journal.c.voice_id == voice_id))
