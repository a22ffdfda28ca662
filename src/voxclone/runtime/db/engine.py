"""Connections to the voxclone database, SQLite or PostgreSQL, from one URL.

The repositories see only three things: :meth:`Database.write` (one write
transaction), :meth:`Database.read` (one consistent snapshot) and
:meth:`Database.checkpoint`. What differs between the dialects stays here:

* **SQLite** (the embedded default, a file under ``VOXCLONE_HOME``): WAL mode,
  a busy timeout, ``secure_delete`` (deleted voice data is overwritten) and
  foreign keys, set on every new connection. Write transactions start with
  ``BEGIN IMMEDIATE`` so the write lock is taken before the first read: two
  writers queue on the busy timeout instead of one failing halfway. The file
  is created 0600 (it holds biometric data).
* **PostgreSQL** (``VOXCLONE_DATABASE_URL``): a pool of psycopg 3 connections
  with a liveness check; reads run at REPEATABLE READ so the several SELECTs
  that load one voice see one snapshot, writes at READ COMMITTED with row locks
  (``SELECT ... FOR UPDATE``, rendered only on PostgreSQL) and unique indexes
  settling races.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import QueuePool

# Execution option marking a connection whose next BEGIN takes the write lock.
_WRITE_OPTION = "voxclone_write"
DEFAULT_BUSY_TIMEOUT_S = 30.0


def sqlite_url(path: Path | str) -> str:
    """The SQLAlchemy URL of a SQLite file."""
    return "sqlite:///" + str(Path(path))


def _normalized_url(url: str | URL) -> URL:
    parsed = make_url(url)
    # "postgresql://" and "postgres://" (what most hosting shows) mean psycopg 3
    # here: it is the driver voxclone ships and tests.
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def _create_private_file(path: Path) -> None:
    """Create the SQLite file 0600 before SQLite does, whatever the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)


class Database:
    """An engine plus the transaction boundaries every repository uses.

    Thread-safe; connections come from a pool. One ``Database`` may be shared by
    several stores (the composition root does that), or a store may open its
    own from a path (tests, the CLI).
    """

    def __init__(
        self,
        url: str | URL,
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        pool_size: int = 5,
    ) -> None:
        self.url = _normalized_url(url)
        self.dialect = self.url.get_backend_name()
        self._schema_lock = threading.Lock()
        self._schema_ready = False
        if self.dialect == "sqlite":
            database = self.url.database
            if not database or database == ":memory:":
                raise ValueError("voxclone needs a SQLite file, not an in-memory database")
            self.path: Path | None = Path(database)
            _create_private_file(self.path)
            self.engine: Engine = create_engine(
                self.url,
                connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
                # Connections are cheap but their pragmas are not free: keep a
                # few, and let bursts open more rather than wait on the pool.
                poolclass=QueuePool,
                pool_size=pool_size,
                max_overflow=-1,
            )
            event.listen(self.engine, "connect", _sqlite_on_connect)
            event.listen(self.engine, "begin", _sqlite_on_begin)
        elif self.dialect == "postgresql":
            self.path = None
            self.engine = create_engine(
                self.url,
                pool_size=pool_size,
                max_overflow=2 * pool_size,
                pool_pre_ping=True,
                # A server that does not answer must not hang a request forever.
                connect_args={"connect_timeout": max(1, int(busy_timeout_s))},
            )
        else:
            raise ValueError(
                f"unsupported database {self.dialect!r}: use sqlite:/// or postgresql://"
            )

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    def describe(self) -> str:
        """The URL without its password, for logs and errors."""
        return self.url.render_as_string(hide_password=True)

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction: committed on success, rolled back on any error."""
        with self.engine.connect() as conn:
            conn.execution_options(**{_WRITE_OPTION: True})
            with conn.begin():
                yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A snapshot: several SELECTs see the same committed state."""
        with self.engine.connect() as conn:
            if not self.is_sqlite:
                conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    def checkpoint(self) -> None:
        """SQLite: fold the WAL into the main file and truncate it (best effort).

        After a deletion this pushes the zeroed pages out of the log, so no
        copy of a deleted voice survives there. PostgreSQL reclaims deleted
        tuples with VACUUM, which the operator schedules.
        """
        if not self.is_sqlite:
            return
        raw = self.engine.raw_connection()
        try:
            # With readers active SQLite checkpoints what it can; a later
            # checkpoint (ours or SQLite's automatic one) finishes the job.
            with contextlib.suppress(Exception):
                raw.driver_connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # type: ignore[union-attr]
        finally:
            raw.close()

    def ensure_schema(self) -> None:
        """Migrate to the newest revision once per process (cheap afterwards)."""
        if self._schema_ready:
            return
        with self._schema_lock:
            if not self._schema_ready:
                from voxclone.runtime.db.revision import is_current

                if not is_current(self):
                    from voxclone.runtime.db.migrate import upgrade

                    upgrade(self)
                self._schema_ready = True

    def close(self) -> None:
        self.engine.dispose()


def open_database(target: str | Path | URL) -> Database:
    """A :class:`Database` for a URL, or for a SQLite file given as a path."""
    if isinstance(target, Path):
        return Database(sqlite_url(target))
    return Database(target)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Autocommit at the driver level: SQLAlchemy's "begin" event below issues
    # BEGIN itself, so the transaction boundaries are exactly ours.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        _enable_wal(cursor)
        # WAL + NORMAL stays atomic and consistent after a process crash; only
        # a power loss may drop the very last commit.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        # Overwrite deleted content with zeros: voice data is biometric.
        cursor.execute("PRAGMA secure_delete=ON")
    finally:
        cursor.close()


# Switching a fresh file to WAL takes an exclusive lock and SQLite answers
# "database is locked" at once instead of waiting on the busy timeout: when
# several processes open a new home together, 1 in 10 of them failed to start
# (3 of 30 runs of four threads opening one fresh file). Retry for this long.
_WAL_SWITCH_WAIT_S = 10.0


def _enable_wal(cursor: Any) -> None:
    deadline = time.monotonic() + _WAL_SWITCH_WAIT_S
    delay = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def _sqlite_on_begin(conn: Connection) -> None:
    write = conn.get_execution_options().get(_WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def upsert(db: Database, table: Table) -> Any:
    """``INSERT ... ON CONFLICT`` for ``db``'s dialect (both spell it the same way)."""
    # Imported here: the other dialect's module is ~40 ms of every start.
    if db.is_sqlite:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)
    from sqlalchemy.dialects.postgresql import insert as postgresql_insert

    return postgresql_insert(table)
