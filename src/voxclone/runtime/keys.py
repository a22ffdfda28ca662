"""API keys with scopes, stored as hashes only (SQLite file or PostgreSQL).

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
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select, update

from voxclone.errors import InvalidInput, NotFound
from voxclone.runtime.db import tables as t
from voxclone.runtime.db.repository import Repository
from voxclone.runtime.key_scopes import ACCESS_SCOPES, SCOPES
from voxclone.runtime.key_scopes import SCOPE_ADMIN as SCOPE_ADMIN  # re-exported
from voxclone.runtime.key_scopes import SCOPE_TTS as SCOPE_TTS
from voxclone.runtime.key_scopes import SCOPE_VOICES_READ as SCOPE_VOICES_READ
from voxclone.runtime.key_scopes import SCOPE_VOICES_WRITE as SCOPE_VOICES_WRITE

KEY_PREFIX = "vox_"
DISPLAY_PREFIX_CHARS = 8
_SECRET_CHARS = 32
_KEY_PATTERN = re.compile(r"^vox_[A-Za-z0-9_-]{32}$")
_MAX_NAME_CHARS = 100

_K = t.api_keys.c


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
    if not chosen & ACCESS_SCOPES:
        raise InvalidInput(
            f"a key needs at least one scope of {', '.join(sorted(ACCESS_SCOPES))}",
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


_COLUMNS = (_K.id, _K.name, _K.owner, _K.scopes, _K.prefix, _K.created_at, _K.revoked_at)


def _record(row: Sequence[Any]) -> KeyRecord:
    key_id, name, owner, scopes, prefix, created_at, revoked_at = tuple(row)
    return KeyRecord(
        id=str(key_id),
        name=str(name),
        owner=str(owner),
        scopes=frozenset(str(scopes).split()),
        created_at=float(created_at),
        revoked_at=None if revoked_at is None else float(revoked_at),
        prefix=str(prefix),
    )


class KeyStore(Repository):
    """API keys in the voxclone key database; safe to share between threads.

    Every query is a single indexed lookup. In the embedded default the keys
    have their own SQLite file (``keys.sqlite3``, WAL: more server workers and
    the CLI read and write it at once); with ``VOXCLONE_DATABASE_URL`` they live
    in the shared PostgreSQL database, so every replica knows every key.
    ``database`` is a shared :class:`Database`, or a path / URL the store opens
    (and closes) itself.
    """

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
        with self._db.write() as conn:
            conn.execute(
                insert(t.api_keys).values(
                    id=record.id,
                    name=record.name,
                    owner=record.owner,
                    scopes=" ".join(sorted(record.scopes)),
                    key_hash=_hash_key(plaintext),
                    prefix=record.prefix,
                    created_at=record.created_at,
                )
            )
        return plaintext, record

    def authenticate(self, plaintext: str) -> KeyRecord | None:
        """The active key matching ``plaintext``, or None."""
        if not isinstance(plaintext, str) or not _KEY_PATTERN.match(plaintext):
            return None
        presented = _hash_key(plaintext)
        with self._db.read() as conn:
            rows = conn.execute(
                select(*_COLUMNS, _K.key_hash).where(_K.prefix == plaintext[:DISPLAY_PREFIX_CHARS])
            ).all()
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
        with self._db.read() as conn:
            row = conn.execute(select(*_COLUMNS).where(_K.id == key_id)).first()
        if row is None:
            raise NotFound("no API key with that id", field="key_id")
        return _record(row)

    def list(self, include_revoked: bool = True) -> builtins.list[KeyRecord]:
        query = select(*_COLUMNS)
        if not include_revoked:
            query = query.where(_K.revoked_at.is_(None))
        with self._db.read() as conn:
            rows = conn.execute(query.order_by(_K.created_at, _K.id)).all()
        return [_record(row) for row in rows]

    def revoke(self, key_id: str) -> KeyRecord:
        """Revoke a key (idempotent); raises NotFound for an unknown id."""
        with self._db.write() as conn:
            conn.execute(
                update(t.api_keys)
                .where(_K.id == key_id, _K.revoked_at.is_(None))
                .values(revoked_at=time.time())
            )
        return self.get(key_id)

    def count_active(self) -> int:
        with self._db.read() as conn:
            count = conn.execute(
                select(func.count()).select_from(t.api_keys).where(_K.revoked_at.is_(None))
            ).scalar_one()
        return int(count)
