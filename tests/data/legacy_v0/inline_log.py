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
biometric data.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from legacy_v0.voice_store import ConsentRecord

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS inline_voice_uses ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " voice_id TEXT NOT NULL,"
    " owner TEXT NOT NULL,"
    " statement_sha256 TEXT NOT NULL,"
    " given_by TEXT NOT NULL,"
    " given_at TEXT NOT NULL,"
    " client_address TEXT,"
    " expires_at REAL NOT NULL,"  # unix time
    " purged_at REAL)"
)
_INDEX = (
    "CREATE INDEX IF NOT EXISTS inline_voice_uses_pending"
    " ON inline_voice_uses (voice_id) WHERE purged_at IS NULL"
)


@dataclass(frozen=True)
class InlineUse:
    voice_id: str
    owner: str
    consent: ConsentRecord
    expires_at: float
    purged_at: float | None


class InlineVoiceLog:
    """SQLite table ``inline_voice_uses`` (thread-safe; one connection, one lock)."""

    def __init__(self, db_path: Path) -> None:
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(db_path), check_same_thread=False, timeout=10.0)
        with self._lock, self._conn:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(_SCHEMA)
            self._conn.execute(_INDEX)

    def record(self, voice_id: str, owner: str, consent: ConsentRecord, expires_at: float) -> None:
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT INTO inline_voice_uses (voice_id, owner, statement_sha256, given_by,"
                " given_at, client_address, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    voice_id,
                    owner,
                    consent.statement_sha256,
                    consent.given_by,
                    consent.given_at,
                    consent.client_address,
                    expires_at,
                ),
            )

    def pending(self) -> list[str]:
        """Voice ids whose cached audio has not been purged yet."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT voice_id FROM inline_voice_uses WHERE purged_at IS NULL"
            ).fetchall()
        return [str(r[0]) for r in rows]

    def mark_purged(self, voice_id: str) -> None:
        with self._lock, self._conn:
            self._conn.execute(
                "UPDATE inline_voice_uses SET purged_at = ?"
                " WHERE voice_id = ? AND purged_at IS NULL",
                (time.time(), voice_id),
            )

    def uses(self, voice_id: str | None = None) -> list[InlineUse]:
        query = (
            "SELECT voice_id, owner, statement_sha256, given_by, given_at, client_address,"
            " expires_at, purged_at FROM inline_voice_uses"
        )
        args: tuple[str, ...] = ()
        if voice_id is not None:
            query += " WHERE voice_id = ?"
            args = (voice_id,)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY id", args).fetchall()
        return [
            InlineUse(r[0], r[1], ConsentRecord(r[2], r[3], r[4], r[5]), float(r[6]), r[7])
            for r in rows
        ]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
