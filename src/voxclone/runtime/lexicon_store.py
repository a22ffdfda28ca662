"""Pronunciation lexicon aggregate: each owner's words → IPA or respelling, per language.

Rows live in ``lexicon_entries`` of the voxclone database (SQLite file or
PostgreSQL, created by migration 0002). The speech service reads an owner's
entries once per request (one indexed query) and hands the text frontend a
compiled ``Lexicon``; nothing is cached in the process, so every replica on a
shared database sees a change at once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import delete, func, select

from voxclone.errors import InvalidInput
from voxclone.runtime.db import tables as t
from voxclone.runtime.db import upsert
from voxclone.runtime.db.repository import Repository
from voxclone.synth.text.lexicon import Pronunciation, check_pronunciation, word_key

_L = t.lexicon_entries.c
# Every request compiles its owner's entries into one pattern: bounded.
MAX_ENTRIES_PER_OWNER = 2000


class LexiconStore(Protocol):
    """Each owner's pronunciations (``/v1/lexicon``; the speech service reads
    ``entries``). Words match by :func:`word_key` within a language."""

    def entries(self, owner: str, language: str | None = None) -> list[Pronunciation]: ...

    def get(self, owner: str, language: str, word: str) -> Pronunciation | None: ...

    def put(self, owner: str, entry: Pronunciation) -> bool:
        """Add or replace ``entry``; True when it is new."""
        ...

    def delete(self, owner: str, language: str, word: str) -> bool: ...


class SqlLexiconStore(Repository):
    """Table ``lexicon_entries``; thread-safe (pooled connections)."""

    def entries(self, owner: str, language: str | None = None) -> list[Pronunciation]:
        query = select(_L.word, _L.language, _L.ipa, _L.respelling).where(_L.owner == owner)
        if language is not None:
            query = query.where(_L.language == language)
        with self._db.read() as conn:
            rows = conn.execute(query.order_by(_L.language, _L.word_key)).all()
        return [Pronunciation(r.word, r.language, r.ipa, r.respelling) for r in rows]

    def get(self, owner: str, language: str, word: str) -> Pronunciation | None:
        if "\x00" in word:  # PostgreSQL text cannot hold NUL; no entry can have one
            return None
        query = select(_L.word, _L.language, _L.ipa, _L.respelling).where(
            _L.owner == owner, _L.language == language, _L.word_key == word_key(word)
        )
        with self._db.read() as conn:
            row = conn.execute(query).first()
        return (
            None if row is None else Pronunciation(row.word, row.language, row.ipa, row.respelling)
        )

    def put(self, owner: str, entry: Pronunciation) -> bool:
        """Add or replace ``entry``; True when it is new."""
        check_pronunciation(entry.word, entry.ipa, entry.respelling)
        key = word_key(entry.word)
        values = {
            "owner": owner,
            "language": entry.language,
            "word_key": key,
            "word": " ".join(entry.word.split()),
            "ipa": entry.ipa.strip() if entry.ipa is not None else None,
            "respelling": entry.respelling.strip() if entry.respelling is not None else None,
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        with self._db.write() as conn:
            existed = conn.execute(
                select(_L.word_key).where(
                    _L.owner == owner, _L.language == entry.language, _L.word_key == key
                )
            ).first()
            if existed is None:
                count = conn.execute(
                    select(func.count()).select_from(t.lexicon_entries).where(_L.owner == owner)
                ).scalar_one()
                if count >= MAX_ENTRIES_PER_OWNER:
                    raise InvalidInput(
                        f"a lexicon holds at most {MAX_ENTRIES_PER_OWNER} entries",
                        field="word",
                        limit=MAX_ENTRIES_PER_OWNER,
                    )
            stmt = upsert(self._db, t.lexicon_entries).values(**values)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["owner", "language", "word_key"],
                    set_={k: stmt.excluded[k] for k in ("word", "ipa", "respelling", "updated_at")},
                )
            )
        return existed is None

    def delete(self, owner: str, language: str, word: str) -> bool:
        if "\x00" in word:
            return False
        with self._db.write() as conn:
            result = conn.execute(
                delete(t.lexicon_entries).where(
                    _L.owner == owner, _L.language == language, _L.word_key == word_key(word)
                )
            )
        return bool(result.rowcount)
