"""Outages of what the service stores into: the database unreachable, the disk full.

Both are the operator's problem and pass: nothing the client sent was wrong,
and the same request works once PostgreSQL is back or space is freed. So an
exception that is one of them (however deep in a chain of causes) becomes a
typed error: :class:`~voxclone.errors.DatabaseUnavailable` (503 with
Retry-After) or :class:`~voxclone.errors.InsufficientStorage` (507), never a
500. ``/readyz`` asks :func:`database_state` and :func:`storage_state` so a
replica that cannot store is taken out of rotation while it lasts.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from voxclone.errors import DatabaseUnavailable, InsufficientStorage, VoxcloneError
from voxclone.runtime.db import Database

# A PostgreSQL restart (pg_ctl stop -m fast, then start -w) of an empty cluster
# took 0.29-0.44 s in 5 runs on 2 cores at load 12 (2026-12-06); a loaded server
# replays more WAL. A client coming back after this long mostly finds it up
# again, without hammering it meanwhile.
DATABASE_RETRY_S = 2.0

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# SQLite result codes (the primary code: the low byte of an extended one).
_SQLITE_FULL = 13
# Busy/locked past the busy timeout, the file unopenable: transient, retry.
_SQLITE_UNAVAILABLE = frozenset({5, 6, 14})  # SQLITE_BUSY, SQLITE_LOCKED, SQLITE_CANTOPEN
_PG_DISK_FULL = "53100"
_CHAIN_DEPTH = 16


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes (explicit first, else the implicit context)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _CHAIN_DEPTH:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def database_unavailable() -> DatabaseUnavailable:
    return DatabaseUnavailable(
        "the database is unreachable; retry shortly", retry_after=DATABASE_RETRY_S
    )


def insufficient_storage() -> InsufficientStorage:
    return InsufficientStorage(
        "the server's storage is full: nothing was stored; retry once the operator has freed space"
    )


def _driver_fault(orig: BaseException | None) -> VoxcloneError | None:
    """What a database driver's own error means, if it is an outage."""
    if isinstance(orig, sqlite3.Error):
        code = getattr(orig, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        if primary == _SQLITE_FULL or "database or disk is full" in str(orig):
            return insufficient_storage()
        if primary in _SQLITE_UNAVAILABLE:
            return database_unavailable()
        return None
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate == _PG_DISK_FULL:
        return insufficient_storage()
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return None
    if isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError):
        # Class 08 (connection), 57P0x (server shutting down or starting),
        # 53300 (too many connections): all pass.
        return database_unavailable()
    return None


def outage_error(exc: BaseException) -> VoxcloneError | None:
    """The typed error ``exc`` stands for when it (or a cause) is an outage, else None.

    Only outages: a constraint violation, a bad query or any other database
    error is a bug or a conflict and keeps its own handling.
    """
    for link in _chain(exc):
        if isinstance(link, DatabaseUnavailable | InsufficientStorage):
            return link
        if isinstance(link, OSError) and link.errno in _FULL_ERRNOS:
            return insufficient_storage()
        if isinstance(link, sa_exc.DBAPIError):
            fault = _driver_fault(link.orig)
            if fault is not None:
                return fault
            if link.connection_invalidated:
                return database_unavailable()
            if not link.orig or isinstance(link.orig, sqlite3.Error):
                continue
            if isinstance(link, sa_exc.OperationalError | sa_exc.InterfaceError):
                return database_unavailable()
        elif isinstance(link, sa_exc.TimeoutError):  # no pooled connection came free
            return database_unavailable()
        elif isinstance(link, sqlite3.Error) or hasattr(link, "sqlstate"):
            fault = _driver_fault(link)
            if fault is not None:
                return fault
    return None


def database_state(db: Database) -> str:
    """``"ok"`` when one trivial query goes through, else ``"unreachable"``."""
    try:
        with db.read() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        if outage_error(exc) is None:
            raise
        return "unreachable"
    return "ok"


def free_bytes(directories: Iterable[Path]) -> int:
    """The least free space (for an unprivileged writer) among ``directories``."""
    least: int | None = None
    for directory in directories:
        stats = os.statvfs(directory)
        available = stats.f_bavail * stats.f_frsize
        least = available if least is None else min(least, available)
    return least if least is not None else 0


def storage_state(directories: Iterable[Path], min_free_bytes: int) -> tuple[str, int]:
    """``("ok" | "full", free bytes)``: full below ``min_free_bytes`` anywhere we write."""
    existing = [d for d in directories if d.is_dir()]
    if not existing:
        return "ok", 0
    free = free_bytes(existing)
    return ("full" if free < min_free_bytes else "ok"), free
