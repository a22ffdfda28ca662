"""Durable record of inline voices: their consent, their expiry, their purge.

An inline reference clip (``/v1/tts`` with ``reference=``) clones a voice for
one request. The voice itself lives only in memory, but audio made with it
lands in the caches (memory, disk, Redis) under its id. This log keeps, per
inline voice: the consent it was made under (a hash of the statement, who
gave it, when, from where; never audio), when it expires, and whether its
cached audio has been purged. Rows that are not yet purged when a process
starts belong to a process that is gone, so their audio is purged then: an
inline voice's audio never outlives its expiry by more than a restart.

Consent rows are kept after the purge, as for an audit log; they hold no
biometric data. The table lives in the voxclone database (SQLite file or
PostgreSQL), created by the same migrations as the voice library.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import insert, select, update

from voxclone.runtime.db import tables as t
from voxclone.runtime.db.repository import Repository
from voxclone.runtime.voice_store import ConsentRecord

_U = t.inline_voice_uses.c


@dataclass(frozen=True)
class InlineUse:
    voice_id: str
    owner: str
    consent: ConsentRecord
    expires_at: float
    purged_at: float | None


class InlineLog(Protocol):
    """What the voice service keeps of inline voices (``service/voices/inline.py``)."""

    def record(
        self, voice_id: str, owner: str, consent: ConsentRecord, expires_at: float
    ) -> None: ...

    def pending(self) -> list[str]:
        """Voices whose cached audio is not purged yet."""
        ...

    def mark_purged(self, voice_id: str) -> None: ...

    def close(self) -> None: ...


class InlineVoiceLog(Repository):
    """Table ``inline_voice_uses``; thread-safe (pooled connections)."""

    def record(self, voice_id: str, owner: str, consent: ConsentRecord, expires_at: float) -> None:
        with self._db.write() as conn:
            conn.execute(
                insert(t.inline_voice_uses).values(
                    voice_id=voice_id,
                    owner=owner,
                    statement_sha256=consent.statement_sha256,
                    given_by=consent.given_by,
                    given_at=consent.given_at,
                    client_address=consent.client_address,
                    expires_at=expires_at,
                )
            )

    def pending(self) -> list[str]:
        """Voice ids whose cached audio has not been purged yet."""
        with self._db.read() as conn:
            rows = conn.execute(select(_U.voice_id).where(_U.purged_at.is_(None)).distinct()).all()
        return [str(r[0]) for r in rows]

    def mark_purged(self, voice_id: str) -> None:
        with self._db.write() as conn:
            conn.execute(
                update(t.inline_voice_uses)
                .where(_U.voice_id == voice_id, _U.purged_at.is_(None))
                .values(purged_at=time.time())
            )

    def uses(self, voice_id: str | None = None) -> list[InlineUse]:
        query = select(
            _U.voice_id,
            _U.owner,
            _U.statement_sha256,
            _U.given_by,
            _U.given_at,
            _U.client_address,
            _U.expires_at,
            _U.purged_at,
        )
        if voice_id is not None:
            query = query.where(_U.voice_id == voice_id)
        with self._db.read() as conn:
            rows = conn.execute(query.order_by(_U.id)).all()
        return [
            InlineUse(r[0], r[1], ConsentRecord(r[2], r[3], r[4], r[5]), float(r[6]), r[7])
            for r in rows
        ]
