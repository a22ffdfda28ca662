"""Bring a database to the newest schema with Alembic (both dialects).

Every voxclone process calls :func:`upgrade` when it opens its database (the
embedded default needs no operator step); ``voxclone db upgrade`` does the same
by hand, e.g. before rolling out a new version to a PostgreSQL cluster.

Two processes starting at once must not both migrate: the whole upgrade runs
in one transaction that first takes the database's write lock (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: a transaction-scoped advisory lock), so the
second process waits, then finds the schema current. DDL is transactional in
both dialects, so a failed migration leaves the previous schema intact.
"""

from __future__ import annotations

import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, text

from voxclone.errors import VoxcloneError
from voxclone.runtime.db.engine import Database

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Any constant works; it only has to be the same in every voxclone process.
_ADVISORY_LOCK_ID = 0x766F78636C6F6E65  # "voxclone"


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.cache
def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(db: Database) -> str | None:
    """The revision the database is at (None: not managed by Alembic yet)."""
    with db.read() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(db: Database, revision: str = "head") -> str:
    """Migrate ``db`` to ``revision``; return the revision it is at afterwards."""
    # Fast path, no lock: a current database is the common case at start-up.
    if revision == "head":
        try:
            if current_revision(db) == head_revision():
                return head_revision()
        except CommandError:
            pass
    with db.write() as conn:
        if not db.is_sqlite:
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _ADVISORY_LOCK_ID})
        try:
            command.upgrade(alembic_config(conn), revision)
        except CommandError as exc:
            if "Can't locate revision" in str(exc):
                raise VoxcloneError(
                    f"the database {db.describe()} was written by a newer voxclone "
                    f"(revision unknown to this version, which knows up to {head_revision()})"
                ) from None
            raise
        found = MigrationContext.configure(conn).get_current_revision()
    assert found is not None
    return found
