"""One database layer for every store: SQLite (embedded default) or PostgreSQL.

* :mod:`.engine` opens a :class:`Database` from a URL (connections, pools,
  SQLite pragmas, transaction boundaries);
* :mod:`.schema` is the current schema as SQLAlchemy Core tables, which the
  repositories (``runtime/voice_store.py``, ``job_store.py``, ``keys.py``,
  ``inline_log.py``) query;
* :mod:`.migrate` brings a database to the newest Alembic revision; the
  revisions in ``migrations/versions`` are the one schema history of both
  dialects.
"""

from voxclone.runtime.db.engine import Database, open_database, sqlite_url, upsert
from voxclone.runtime.db.migrate import current_revision, head_revision, upgrade

__all__ = [
    "Database",
    "current_revision",
    "head_revision",
    "open_database",
    "sqlite_url",
    "upgrade",
    "upsert",
]
