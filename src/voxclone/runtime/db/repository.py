"""The base every repository (store) on the voxclone database builds on.

A store either borrows the composition root's shared :class:`Database` (one
pool for the voice library, jobs, lexicon and inline log; whoever built it
closes it) or opens its own from a path or URL (tests, the CLI), which its
``close()`` then disposes. Either way the schema is brought to the newest
revision before the first query.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from voxclone.runtime.db.engine import Database, open_database


class Repository:
    """Holds ``self._db``; closes it only when it opened it."""

    def __init__(self, database: Database | Path | str) -> None:
        if isinstance(database, Database):
            self._db, self._owns_db = database, False
        else:
            self._db, self._owns_db = open_database(database), True
        self._db.ensure_schema()

    @property
    def database(self) -> Database:
        return self._db

    def close(self) -> None:
        if self._owns_db:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
