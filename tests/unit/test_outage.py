"""runtime/outage.py names outages only: a full disk, an unreachable database.

A bug or a conflict (a missing table, a unique violation) must stay what it is
(500, 409), never be passed off as a passing outage. Real SQLite errors, raised
by a real database file.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from sqlalchemy import text

from voxclone.errors import DatabaseUnavailable, InsufficientStorage, VoxcloneError
from voxclone.runtime.db import Database, sqlite_url
from voxclone.runtime.outage import outage_error, storage_state


def _raised(db: Database, sql: str) -> BaseException:
    with pytest.raises(Exception) as caught, db.write() as conn:
        conn.execute(text(sql))
    return caught.value


def test_database_bugs_and_conflicts_are_not_outages(tmp_path: Path) -> None:
    db = Database(sqlite_url(tmp_path / "x.sqlite3"))
    try:
        assert outage_error(_raised(db, "SELECT * FROM no_such_table")) is None
        with db.write() as conn:
            conn.execute(text("CREATE TABLE t (k INTEGER PRIMARY KEY)"))
            conn.execute(text("INSERT INTO t VALUES (1)"))
        assert outage_error(_raised(db, "INSERT INTO t VALUES (1)")) is None
    finally:
        db.close()


def test_a_full_disk_and_an_unreachable_database_are_named_through_causes() -> None:
    full = OSError(errno.ENOSPC, "No space left on device")
    try:
        try:
            raise full
        except OSError as exc:
            raise VoxcloneError("the clone could not be saved") from exc
    except VoxcloneError as wrapped:
        assert isinstance(outage_error(wrapped), InsufficientStorage)
    assert outage_error(OSError(errno.EACCES, "denied")) is None

    import psycopg
    from sqlalchemy.exc import OperationalError

    refused = OperationalError("SELECT 1", {}, psycopg.OperationalError("connection refused"))
    fault = outage_error(refused)
    assert isinstance(fault, DatabaseUnavailable) and fault.retry_after


def test_storage_is_full_below_the_threshold(tmp_path: Path) -> None:
    state, free = storage_state([tmp_path], 1)
    assert state == "ok" and free > 0
    assert storage_state([tmp_path], free + (1 << 40))[0] == "full"
    assert storage_state([tmp_path / "missing"], 1) == ("ok", 0)
