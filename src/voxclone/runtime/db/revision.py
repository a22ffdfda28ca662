"""The newest schema revision, and the one a database is at, without Alembic.

Importing Alembic and reading its script directory cost ~0.13 s of a one-shot
``voxclone say`` (~1.7 s on 2 cores, ``python -X importtime``). A process whose
database is already current (every start but the first after an upgrade)
checks the ``alembic_version`` row itself and never imports Alembic;
:mod:`.migrate` runs only when the row differs. tests/unit/test_db_migrations.py
checks :data:`HEAD_REVISION` against Alembic's own head, so a new migration
that forgets to move it fails CI.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from voxclone.runtime.db.engine import Database

HEAD_REVISION = "0004_job_voices"


def stored_revision(db: Database) -> str | None:
    """The single revision in ``alembic_version``; None where there is no such
    table yet, or not exactly one row (a branched or hand-edited history:
    Alembic itself decides then)."""
    try:
        with db.read() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    except SQLAlchemyError:  # no table: a new or pre-Alembic database
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


def is_current(db: Database) -> bool:
    return stored_revision(db) == HEAD_REVISION
