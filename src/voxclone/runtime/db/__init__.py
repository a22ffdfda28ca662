"""One database layer for every store: SQLite (embedded default) or PostgreSQL.

* :mod:`.engine` opens a :class:`Database` from a URL (connections, pools,
  SQLite pragmas, transaction boundaries);
* :mod:`.schema` is the current schema as SQLAlchemy Core tables, which the
  repositories (``runtime/voice_store/``, ``job_store/``, ``keys.py``,
  ``lexicon_store.py``, ``inline_log.py``) query;
* :mod:`.repository` is their base: it borrows a shared :class:`Database` or
  opens (and closes) its own;
* :mod:`.migrate` brings a database to the newest Alembic revision; the
  revisions in ``migrations/versions`` are the one schema history of both
  dialects.
"""

from typing import TYPE_CHECKING, Any

from voxclone.runtime.db.engine import Database, open_database, sqlite_url, upsert

if TYPE_CHECKING:
    from voxclone.runtime.db.migrate import current_revision, head_revision, upgrade

_MIGRATE = ("current_revision", "head_revision", "upgrade")


def __getattr__(name: str) -> Any:
    # Alembic is imported only where a migration runs or is asked about
    # (db/revision.py: a current database never needs it).
    if name in _MIGRATE:
        from voxclone.runtime.db import migrate

        return getattr(migrate, name)
    raise AttributeError(name)


__all__ = [
    "Database",
    "current_revision",
    "head_revision",
    "open_database",
    "sqlite_url",
    "upgrade",
    "upsert",
]
