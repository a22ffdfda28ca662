"""API keys with scopes, stored in SQLite as hashes only.

A key is shown to its creator once (``vox_`` + 32 URL-safe random characters,
192 bits of entropy). Only its SHA-256 is stored. A slow password hash
(bcrypt, scrypt) exists to make guessing *low-entropy* secrets expensive;
guessing a 192-bit random key is infeasible whatever the hash speed, so a fast
hash is as safe here and keeps authentication cheap on every request.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from voxclone.errors import InvalidInput, NotFound

SCOPE_TTS = "tts"
SCOPE_VOICES_READ = "voices:read"
SCOPE_VOICES_WRITE = "voices:write"
SCOPE_ADMIN = "admin"
SCOPES: frozenset[str] = frozenset({SCOPE_TTS, SCOPE_VOICES_READ, SCOPE_VOICES_WRITE, SCOPE_ADMIN})

KEY_PREFIX = "vox_"
DISPLAY_PREFIX_CHARS = 8
_SECRET_CHARS = 32
_KEY_PATTERN = re.compile(r"^vox_[A-Za-z0-9_-]{32}$")
_MAX_NAME_CHARS = 100

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    owner       TEXT NOT NULL,
    scopes      TEXT NOT NULL,
    key_hash    BLOB NOT NULL UNIQUE,
    prefix      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    revoked_at  REAL
);
CREATE INDEX IF NOT EXISTS api_keys_prefix ON api_keys (prefix);
"""


@dataclass(frozen=True)
class KeyRecord:
    id: str
    name: str
    owner: str
    scopes: frozenset[str]
    created_at: float  # Unix seconds
    revoked_at: float | None
    prefix: str  # first characters of the key, safe to display

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def allows(self, scope: str) -> bool:
        """True if this key grants ``scope``; ``admin`` grants everything."""
        return SCOPE_ADMIN in self.scopes or scope in self.scopes


def _hash_key(plaintext: str) -> bytes:
    return hashlib.sha256(plaintext.encode("utf-8")).digest()


def _validate_scopes(scopes: Iterable[str]) -> frozenset[str]:
    chosen = frozenset(scopes)
    unknown = chosen - SCOPES
    if unknown:
        raise InvalidInput(
            f"unknown scope(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(SCOPES))}",
            field="scopes",
        )
    if not chosen:
        raise InvalidInput(
            f"a key needs at least one scope; allowed: {', '.join(sorted(SCOPES))}",
            field="scopes",
        )
    return chosen


def _validate_name(name: str) -> str:
    cleaned = name.strip()
    if not cleaned or len(cleaned) > _MAX_NAME_CHARS:
        raise InvalidInput(
            f"key name must be 1 to {_MAX_NAME_CHARS} characters",
            field="name",
            limit=_MAX_NAME_CHARS,
        )
    return cleaned


_COLUMNS = "id, name, owner, scopes, prefix, created_at, revoked_at"


def _record(row: sqlite3.Row | tuple[object, ...]) -> KeyRecord:
    key_id, name, owner, scopes, prefix, created_at, revoked_at = tuple(row)
    return KeyRecord(
        id=str(key_id),
        name=str(name),
        owner=str(owner),
        scopes=frozenset(str(scopes).split()),
        created_at=float(created_at),  # type: ignore[arg-type]
        revoked_at=None if revoked_at is None else float(revoked_at),  # type: ignore[arg-type]
        prefix=str(prefix),
    )


class KeyStore:
    """SQLite-backed key store; safe to share between threads.

    One connection guarded by a lock: every query is a single indexed lookup,
    so serializing them costs nothing noticeable, and WAL mode lets other
    processes (more server workers, the CLI) read and write the same file.
    """

    def __init__(self, db_path: Path) -> None:
        db_path = Path(db_path)
        db_path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(db_path, check_same_thread=False, timeout=10.0)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            self._conn.commit()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def create(
        self, name: str, scopes: set[str] | frozenset[str], owner: str | None = None
    ) -> tuple[str, KeyRecord]:
        """Create a key; the plaintext is returned here and never again."""
        clean_name = _validate_name(name)
        chosen = _validate_scopes(scopes)
        plaintext = KEY_PREFIX + secrets.token_urlsafe(24)  # 24 bytes -> 32 chars
        assert len(plaintext) == len(KEY_PREFIX) + _SECRET_CHARS
        key_id = "key_" + secrets.token_hex(8)
        record = KeyRecord(
            id=key_id,
            name=clean_name,
            owner=owner if owner else key_id,  # by default each key is its own tenant
            scopes=chosen,
            created_at=time.time(),
            revoked_at=None,
            prefix=plaintext[:DISPLAY_PREFIX_CHARS],
        )
        with self._lock:
            self._conn.execute(
                "INSERT INTO api_keys (id, name, owner, scopes, key_hash, prefix, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    record.name,
                    record.owner,
                    " ".join(sorted(record.scopes)),
                    _hash_key(plaintext),
                    record.prefix,
                    record.created_at,
                ),
            )
            self._conn.commit()
        return plaintext, record

    def authenticate(self, plaintext: str) -> KeyRecord | None:
        """The active key matching ``plaintext``, or None."""
        if not isinstance(plaintext, str) or not _KEY_PATTERN.match(plaintext):
            return None
        presented = _hash_key(plaintext)
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_COLUMNS}, key_hash FROM api_keys WHERE prefix = ?",
                (plaintext[:DISPLAY_PREFIX_CHARS],),
            ).fetchall()
        match: KeyRecord | None = None
        for row in rows:
            # Compare every candidate in constant time so timing reveals
            # nothing about how much of a stored hash a guess matched.
            if hmac.compare_digest(bytes(row[-1]), presented):
                match = _record(row[:-1])
        if match is None or not match.active:
            return None
        return match

    def get(self, key_id: str) -> KeyRecord:
        with self._lock:
            row = self._conn.execute(
                f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,)
            ).fetchone()
        if row is None:
            raise NotFound("no API key with that id", field="key_id")
        return _record(row)

    def list(self, include_revoked: bool = True) -> builtins.list[KeyRecord]:
        query = f"SELECT {_COLUMNS} FROM api_keys"
        if not include_revoked:
            query += " WHERE revoked_at IS NULL"
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY created_at, id").fetchall()
        return [_record(row) for row in rows]

    def revoke(self, key_id: str) -> KeyRecord:
        """Revoke a key (idempotent); raises NotFound for an unknown id."""
        with self._lock:
            self._conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (time.time(), key_id),
            )
            self._conn.commit()
        return self.get(key_id)

    def count_active(self) -> int:
        with self._lock:
            (count,) = self._conn.execute(
                "SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL"
            ).fetchone()
        return int(count)
