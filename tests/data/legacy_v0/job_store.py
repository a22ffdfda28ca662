"""Background job state (voice refinement and other long work).

A job moves ``queued → running → succeeded | failed | cancelled``; terminal
states are final. Cancellation is cooperative: :meth:`JobStore.request_cancel`
cancels a queued job at once and flags a running one, and the worker checks
:meth:`JobStore.is_cancel_requested` between steps.

Two stores implement the :class:`JobStore` protocol: :class:`SqliteJobStore`
(survives restarts; may share the voice library's SQLite file, with its own
tables) and :class:`InMemoryJobStore` (tests, throw-away servers). Work queues
live in process memory, so after a restart nothing will ever pick up a job
that was queued or running: :meth:`SqliteJobStore.recover_interrupted` marks
those failed with "interrupted by restart".

:class:`JobEvents` lets asyncio code await a job's progress while the work
itself runs in worker threads.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import math
import secrets
import sqlite3
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol, Self, runtime_checkable

from legacy_v0.voice_store import SqliteDatabase, apply_migrations, utc_now_iso
from voxclone.errors import Conflict, InvalidInput, NotFound

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JOB_STATES: frozenset[str] = frozenset({"queued", "running", "succeeded", "failed", "cancelled"})
TERMINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
INTERRUPTED_MESSAGE = "interrupted by restart"
LIST_MAX_LIMIT = 1000

# Fields a worker may change through update(); id, owner, kind, voice and
# creation time are fixed when the job is created.
_UPDATABLE_FIELDS = frozenset({"state", "progress", "message", "result", "error"})


@dataclass(frozen=True)
class JobRecord:
    id: str
    kind: str
    voice_id: str | None
    owner: str
    state: str
    progress: float  # 0-100
    message: str
    created_at: str  # ISO-8601 UTC
    updated_at: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    cancel_requested: bool = False

    @property
    def done(self) -> bool:
        return self.state in TERMINAL_STATES


@runtime_checkable
class JobStore(Protocol):
    """Persistence of job state. ``owner=None`` means any owner (admin)."""

    def create(self, *, kind: str, owner: str, voice_id: str | None = None) -> JobRecord: ...

    def get(self, job_id: str, owner: str | None) -> JobRecord: ...

    def update(self, job_id: str, **fields: Any) -> JobRecord: ...

    def request_cancel(self, job_id: str, owner: str | None) -> JobRecord: ...

    def is_cancel_requested(self, job_id: str) -> bool: ...

    def list(self, owner: str | None, limit: int = 100) -> builtins.list[JobRecord]: ...

    def delete_for_voice(self, voice_id: str) -> int: ...

    def recover_interrupted(self) -> int: ...

    def close(self) -> None: ...


def new_job_id() -> str:
    """Opaque id: ``j_`` + 16 url-safe random characters."""
    return "j_" + secrets.token_urlsafe(12)


def _not_found(job_id: str) -> NotFound:
    # Same answer for a missing job and another owner's job.
    return NotFound(f"job {job_id[:40]!r} not found", field="job_id")


def _check_limit(limit: int) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= LIST_MAX_LIMIT:
        raise InvalidInput(
            f"limit must be between 1 and {LIST_MAX_LIMIT}", field="limit", limit=LIST_MAX_LIMIT
        )


def _apply_update(job: JobRecord, fields: dict[str, Any]) -> JobRecord:
    """Validate an update against the job's current state and return the new record."""
    unknown = set(fields) - _UPDATABLE_FIELDS
    if unknown:
        raise ValueError(f"cannot update job fields: {', '.join(sorted(unknown))}")
    if job.done:
        raise Conflict(f"job is already {job.state} and cannot change", field="state")
    changes = dict(fields)
    state = changes.get("state", job.state)
    if state not in JOB_STATES:
        raise InvalidInput(
            f"job state must be one of {', '.join(sorted(JOB_STATES))}", field="state"
        )
    if state == "queued" and job.state != "queued":
        raise Conflict("a started job cannot go back to queued", field="state")
    if "progress" in changes:
        progress = float(changes["progress"])
        if math.isnan(progress):
            raise InvalidInput("progress must be a number from 0 to 100", field="progress")
        # Workers compute progress as ratios; clamp tiny overshoots instead of failing the job.
        changes["progress"] = min(100.0, max(0.0, progress))
    if state == "succeeded" and "progress" not in changes:
        changes["progress"] = 100.0
    for key in ("result", "error"):
        if changes.get(key) is not None and not isinstance(changes[key], dict):
            raise InvalidInput(f"job {key} must be a JSON object", field=key)
    if "message" in changes:
        changes["message"] = str(changes["message"])
    return replace(job, **changes, updated_at=utc_now_iso())


def _interrupted(job: JobRecord) -> JobRecord:
    return replace(
        job,
        state="failed",
        message=INTERRUPTED_MESSAGE,
        error={"code": "interrupted", "message": INTERRUPTED_MESSAGE},
        updated_at=utc_now_iso(),
    )


def _cancelled_or_flagged(job: JobRecord) -> JobRecord:
    if job.done:
        return job  # Idempotent: cancelling a finished job changes nothing.
    if job.state == "queued":
        # No worker holds it yet, so it can end right away.
        return replace(
            job,
            state="cancelled",
            message="cancelled",
            cancel_requested=True,
            updated_at=utc_now_iso(),
        )
    return replace(job, cancel_requested=True, updated_at=utc_now_iso())


# --------------------------------------------------------------------------
# In-memory store
# --------------------------------------------------------------------------


class InMemoryJobStore:
    """Jobs in a dict; thread-safe; forgets everything when the process ends."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobRecord] = {}
        self._lock = threading.Lock()

    def create(self, *, kind: str, owner: str, voice_id: str | None = None) -> JobRecord:
        now = utc_now_iso()
        job = JobRecord(
            id=new_job_id(),
            kind=kind,
            voice_id=voice_id,
            owner=owner,
            state="queued",
            progress=0.0,
            message="queued",
            created_at=now,
            updated_at=now,
        )
        with self._lock:
            self._jobs[job.id] = job
        return job

    def get(self, job_id: str, owner: str | None) -> JobRecord:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or (owner is not None and job.owner != owner):
            raise _not_found(job_id)
        return job

    def update(self, job_id: str, **fields: Any) -> JobRecord:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise _not_found(job_id)
            updated = _apply_update(job, fields)
            self._jobs[job_id] = updated
        return updated

    def request_cancel(self, job_id: str, owner: str | None) -> JobRecord:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or (owner is not None and job.owner != owner):
                raise _not_found(job_id)
            updated = _cancelled_or_flagged(job)
            self._jobs[job_id] = updated
        return updated

    def is_cancel_requested(self, job_id: str) -> bool:
        return self.get(job_id, None).cancel_requested

    def list(self, owner: str | None, limit: int = 100) -> builtins.list[JobRecord]:
        """Newest first."""
        _check_limit(limit)
        with self._lock:
            # Dicts keep insertion order, which is creation order even when two
            # jobs share a timestamp.
            jobs = [j for j in reversed(self._jobs.values()) if owner is None or j.owner == owner]
        return jobs[:limit]

    def delete_for_voice(self, voice_id: str) -> int:
        with self._lock:
            doomed = [k for k, j in self._jobs.items() if j.voice_id == voice_id]
            for key in doomed:
                del self._jobs[key]
        return len(doomed)

    def recover_interrupted(self) -> int:
        # A fresh in-memory store has nothing left over from a previous process.
        return 0

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------
# SQLite store
# --------------------------------------------------------------------------

_JOB_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        (
            "CREATE TABLE jobs ("
            " id TEXT PRIMARY KEY,"
            " kind TEXT NOT NULL,"
            " voice_id TEXT,"
            " owner TEXT NOT NULL,"
            " state TEXT NOT NULL,"
            " progress REAL NOT NULL,"
            " message TEXT NOT NULL,"
            " created_at TEXT NOT NULL,"
            " updated_at TEXT NOT NULL,"
            " result_json TEXT,"
            " error_json TEXT,"
            " cancel_requested INTEGER NOT NULL DEFAULT 0)"
        ),
        "CREATE INDEX jobs_owner_created ON jobs (owner, created_at)",
        "CREATE INDEX jobs_state ON jobs (state)",
        "CREATE INDEX jobs_voice ON jobs (voice_id)",
    ),
)

_JOB_COLUMNS = (
    "id, kind, voice_id, owner, state, progress, message, created_at, updated_at,"
    " result_json, error_json, cancel_requested"
)


def _job_from_row(row: Sequence[Any]) -> JobRecord:
    return JobRecord(
        id=row[0],
        kind=row[1],
        voice_id=row[2],
        owner=row[3],
        state=row[4],
        progress=float(row[5]),
        message=row[6],
        created_at=row[7],
        updated_at=row[8],
        result=None if row[9] is None else json.loads(row[9]),
        error=None if row[10] is None else json.loads(row[10]),
        cancel_requested=bool(row[11]),
    )


def _dumps_or_none(value: dict[str, Any] | None, field_name: str) -> str | None:
    if value is None:
        return None
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise InvalidInput(
            f"job {field_name} must contain only JSON values", field=field_name
        ) from None


class SqliteJobStore:
    """Jobs in a SQLite file; the file may be the voice library's own."""

    COMPONENT = "jobs"

    def __init__(self, path: Path, *, recover_on_open: bool = True) -> None:
        """Open (and migrate) the job tables.

        ``recover_on_open`` fails jobs left queued/running by a previous
        process. Turn it off when several processes share one file, since each
        would otherwise fail the others' live jobs; call
        :meth:`recover_interrupted` from one place instead.
        """
        self._db = SqliteDatabase(path)
        self.schema_version = apply_migrations(self._db, self.COMPONENT, _JOB_MIGRATIONS)
        if recover_on_open:
            self.recover_interrupted()

    def create(self, *, kind: str, owner: str, voice_id: str | None = None) -> JobRecord:
        now = utc_now_iso()
        job = JobRecord(
            id=new_job_id(),
            kind=kind,
            voice_id=voice_id,
            owner=owner,
            state="queued",
            progress=0.0,
            message="queued",
            created_at=now,
            updated_at=now,
        )
        with self._db.write() as conn:
            self._insert_or_replace(conn, job, insert=True)
        return job

    def get(self, job_id: str, owner: str | None) -> JobRecord:
        with self._db.read() as conn:
            return self._load(conn, job_id, owner)

    def update(self, job_id: str, **fields: Any) -> JobRecord:
        with self._db.write() as conn:
            updated = _apply_update(self._load(conn, job_id, None), fields)
            self._insert_or_replace(conn, updated, insert=False)
        return updated

    def request_cancel(self, job_id: str, owner: str | None) -> JobRecord:
        with self._db.write() as conn:
            job = self._load(conn, job_id, owner)
            updated = _cancelled_or_flagged(job)
            if updated is not job:
                self._insert_or_replace(conn, updated, insert=False)
        return updated

    def is_cancel_requested(self, job_id: str) -> bool:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
        if row is None:
            raise _not_found(job_id)
        return bool(row[0])

    def list(self, owner: str | None, limit: int = 100) -> builtins.list[JobRecord]:
        """Newest first."""
        _check_limit(limit)
        where = "" if owner is None else " WHERE owner = ?"
        params: tuple[Any, ...] = () if owner is None else (owner,)
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs{where}"
                " ORDER BY created_at DESC, rowid DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [_job_from_row(row) for row in rows]

    def delete_for_voice(self, voice_id: str) -> int:
        """Forget every job about a voice (part of deleting the voice)."""
        with self._db.write() as conn:
            cursor = conn.execute("DELETE FROM jobs WHERE voice_id = ?", (voice_id,))
        self._db.checkpoint()
        return cursor.rowcount

    def recover_interrupted(self) -> int:
        """Fail jobs a previous process left queued or running; return how many."""
        with self._db.write() as conn:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE state IN ('queued', 'running')"
            ).fetchall()
            for row in rows:
                self._insert_or_replace(conn, _interrupted(_job_from_row(row)), insert=False)
        return len(rows)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def _load(conn: sqlite3.Connection, job_id: str, owner: str | None) -> JobRecord:
        if owner is None:
            row = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
        else:
            row = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ? AND owner = ?", (job_id, owner)
            ).fetchone()
        if row is None:
            raise _not_found(job_id)
        return _job_from_row(row)

    @staticmethod
    def _insert_or_replace(conn: sqlite3.Connection, job: JobRecord, *, insert: bool) -> None:
        values = (
            job.kind,
            job.voice_id,
            job.owner,
            job.state,
            job.progress,
            job.message,
            job.created_at,
            job.updated_at,
            _dumps_or_none(job.result, "result"),
            _dumps_or_none(job.error, "error"),
            int(job.cancel_requested),
        )
        if insert:
            conn.execute(
                f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job.id, *values),
            )
        else:
            conn.execute(
                "UPDATE jobs SET kind = ?, voice_id = ?, owner = ?, state = ?, progress = ?,"
                " message = ?, created_at = ?, updated_at = ?, result_json = ?, error_json = ?,"
                " cancel_requested = ? WHERE id = ?",
                (*values, job.id),
            )


# --------------------------------------------------------------------------
# Progress events for asyncio subscribers
# --------------------------------------------------------------------------


class JobSubscription:
    """One subscriber's queue of updates for one job.

    Use as ``async with events.subscribe(job_id) as sub: async for job in sub``;
    iteration ends after a terminal state.
    """

    def __init__(
        self, events: JobEvents, job_id: str, loop: asyncio.AbstractEventLoop, max_queue: int
    ) -> None:
        self.job_id = job_id
        self.loop = loop
        self._events = events
        self._queue: asyncio.Queue[JobRecord] = asyncio.Queue(maxsize=max_queue)
        self._finished = False

    def offer(self, job: JobRecord) -> None:
        """Queue an update; must run on ``self.loop``."""
        if self._queue.full():
            # A slow reader only needs the newest progress; drop the oldest
            # update rather than block the worker or grow without bound.
            self._queue.get_nowait()
        self._queue.put_nowait(job)

    async def next(self, timeout: float | None = None) -> JobRecord:
        """The next update; raises TimeoutError after ``timeout`` seconds."""
        return await asyncio.wait_for(self._queue.get(), timeout)

    def __aiter__(self) -> AsyncIterator[JobRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[JobRecord]:
        while not self._finished:
            job = await self._queue.get()
            self._finished = job.done
            yield job

    def close(self) -> None:
        self._events.unsubscribe(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()


class JobEvents:
    """In-process pub/sub of job updates, one asyncio.Queue per subscriber.

    ``publish`` may be called from any thread: updates are handed to each
    subscriber's own event loop with ``call_soon_threadsafe``, because
    asyncio queues are not thread-safe.
    """

    def __init__(self, *, max_queue: int = 64) -> None:
        self._max_queue = max_queue
        self._subscribers: dict[str, builtins.list[JobSubscription]] = {}
        self._lock = threading.Lock()

    def subscribe(self, job_id: str, initial: JobRecord | None = None) -> JobSubscription:
        """Start receiving updates for ``job_id`` (call from a coroutine).

        Pass the job's current record as ``initial`` so a subscriber that
        arrives after the last update still sees the final state.
        """
        subscription = JobSubscription(self, job_id, asyncio.get_running_loop(), self._max_queue)
        with self._lock:
            self._subscribers.setdefault(job_id, []).append(subscription)
        if initial is not None:
            subscription.offer(initial)
        return subscription

    def unsubscribe(self, subscription: JobSubscription) -> None:
        with self._lock:
            subscribers = self._subscribers.get(subscription.job_id, [])
            if subscription in subscribers:
                subscribers.remove(subscription)
            if not subscribers:
                self._subscribers.pop(subscription.job_id, None)

    def subscriber_count(self, job_id: str) -> int:
        with self._lock:
            return len(self._subscribers.get(job_id, []))

    def publish(self, job: JobRecord) -> None:
        """Deliver ``job`` to every subscriber of ``job.id``; safe from any thread."""
        with self._lock:
            subscribers = builtins.list(self._subscribers.get(job.id, []))
        try:
            current_loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current_loop = None
        for subscription in subscribers:
            if subscription.loop is current_loop:
                subscription.offer(job)
                continue
            try:
                subscription.loop.call_soon_threadsafe(subscription.offer, job)
            except RuntimeError:
                # The subscriber's loop has closed: nobody is listening any more.
                self.unsubscribe(subscription)
