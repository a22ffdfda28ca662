"""Background job state (voice refinement and other long work).

A job moves ``queued → running → succeeded | failed | cancelled``; terminal
states are final. Cancellation is cooperative: :meth:`JobStore.request_cancel`
cancels a queued job at once and flags a running one, and the worker checks
:meth:`JobStore.is_cancel_requested` between steps.

Two stores implement the :class:`JobStore` protocol: :class:`SqlJobStore`
(alias ``SqliteJobStore``; survives restarts; shares the voice library's
database, SQLite or PostgreSQL, with its own table) and
:class:`InMemoryJobStore` (tests, throw-away servers). Work queues live in
process memory, so after a restart nothing will ever pick up a job
that was queued or running: :meth:`SqlJobStore.recover_interrupted` marks
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
import threading
import time
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol, Self, runtime_checkable

from sqlalchemy import Connection, and_, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from voxclone.errors import Conflict, InvalidInput, NotFound
from voxclone.runtime import job_voices
from voxclone.runtime.db import Database
from voxclone.runtime.db import schema as t
from voxclone.runtime.db.repository import Repository
from voxclone.runtime.job_fairness import fair_order, not_owned_by
from voxclone.runtime.voice_store import utc_now_iso

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
    # Durable queue jobs only (SqlJobStore.enqueue); None/0 for in-process jobs.
    payload: dict[str, Any] | None = None
    attempts: int = 0
    max_attempts: int = 1
    claimed_by: str | None = None
    lease_expires_at: float | None = None  # Unix seconds
    run_after: float | None = None  # Unix seconds: not claimed before (backoff)
    idempotency_key: str | None = None
    started_at: float | None = None  # Unix seconds of the latest claim

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

    def delete_for_voice(self, voice_id: str, *, keep_kinds: Collection[str] = ()) -> int: ...

    def recover_interrupted(self) -> int: ...

    def close(self) -> None: ...


def new_job_id() -> str:
    """Opaque id: ``j_`` + 16 url-safe random characters."""
    return "j_" + secrets.token_urlsafe(12)


def queued_job(kind: str, owner: str, voice_id: str | None, **fields: Any) -> JobRecord:
    """A new job record, queued now (every store creates jobs this way)."""
    now = utc_now_iso()
    return JobRecord(
        id=new_job_id(),
        kind=kind,
        voice_id=voice_id,
        owner=owner,
        state="queued",
        progress=0.0,
        message="queued",
        created_at=now,
        updated_at=now,
        **fields,
    )


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


class LeaseLost(Exception):
    """The worker no longer holds the job's lease (expired and taken over, or
    the job was cancelled, deleted or ended): it must stop and write nothing."""


def _abandoned_end(job: JobRecord) -> JobRecord:
    """The terminal state of a job whose worker died and that must not run again."""
    if job.cancel_requested:
        return replace(
            job,
            state="cancelled",
            message="cancelled",
            claimed_by=None,
            lease_expires_at=None,
            updated_at=utc_now_iso(),
        )
    message = (
        f"the worker running this job stopped responding; gave up after "
        f"{job.attempts} attempt{'s' if job.attempts != 1 else ''}"
    )
    return replace(
        job,
        state="failed",
        message=message,
        error={"code": "worker_lost", "message": message},
        claimed_by=None,
        lease_expires_at=None,
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
        job = queued_job(kind, owner, voice_id)
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

    def delete_for_voice(self, voice_id: str, *, keep_kinds: Collection[str] = ()) -> int:
        with self._lock:
            doomed = [
                k
                for k, j in self._jobs.items()
                if j.voice_id == voice_id and j.kind not in keep_kinds
            ]
            for key in doomed:
                del self._jobs[key]
        return len(doomed)

    def recover_interrupted(self) -> int:
        # A fresh in-memory store has nothing left over from a previous process.
        return 0

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------
# The job repository on SQLAlchemy Core (SQLite or PostgreSQL)
# --------------------------------------------------------------------------

_J = t.jobs.c
_JOB_COLUMNS = (
    _J.id,
    _J.kind,
    _J.voice_id,
    _J.owner,
    _J.state,
    _J.progress,
    _J.message,
    _J.created_at,
    _J.updated_at,
    _J.result_json,
    _J.error_json,
    _J.cancel_requested,
    _J.payload_json,
    _J.attempts,
    _J.max_attempts,
    _J.claimed_by,
    _J.lease_expires_at,
    _J.run_after,
    _J.idempotency_key,
    _J.started_at,
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
        payload=None if row[12] is None else json.loads(row[12]),
        attempts=int(row[13]),
        max_attempts=int(row[14]),
        claimed_by=row[15],
        lease_expires_at=None if row[16] is None else float(row[16]),
        run_after=None if row[17] is None else float(row[17]),
        idempotency_key=row[18],
        started_at=None if row[19] is None else float(row[19]),
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


def _row_values(job: JobRecord) -> dict[str, Any]:
    return {
        "kind": job.kind,
        "voice_id": job.voice_id,
        "owner": job.owner,
        "state": job.state,
        "progress": job.progress,
        "message": job.message,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "result_json": _dumps_or_none(job.result, "result"),
        "error_json": _dumps_or_none(job.error, "error"),
        "cancel_requested": int(job.cancel_requested),
        "payload_json": _dumps_or_none(job.payload, "payload"),
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "claimed_by": job.claimed_by,
        "lease_expires_at": job.lease_expires_at,
        "run_after": job.run_after,
        "idempotency_key": job.idempotency_key,
        "started_at": job.started_at,
    }


class SqlJobStore(Repository):
    """Jobs in the voxclone database; may share it with the voice library.

    ``database`` is a shared :class:`Database`, or a path / URL the store opens
    (and closes) itself.
    """

    def __init__(self, database: Database | Path | str, *, recover_on_open: bool = True) -> None:
        """Open (and migrate) the job tables.

        ``recover_on_open`` fails jobs left queued/running by a previous
        process. Turn it off when several processes share one database, since
        each would otherwise fail the others' live jobs; call
        :meth:`recover_interrupted` from one place instead.
        """
        super().__init__(database)
        if recover_on_open:
            self.recover_interrupted()

    def create(self, *, kind: str, owner: str, voice_id: str | None = None) -> JobRecord:
        job = queued_job(kind, owner, voice_id)
        with self._db.write() as conn:
            conn.execute(insert(t.jobs).values(id=job.id, **_row_values(job)))
        return job

    def get(self, job_id: str, owner: str | None) -> JobRecord:
        with self._db.read() as conn:
            return self._load(conn, job_id, owner)

    def update(self, job_id: str, **fields: Any) -> JobRecord:
        with self._db.write() as conn:
            updated = _apply_update(self._load(conn, job_id, None, lock=True), fields)
            self._save(conn, updated)
        return updated

    def request_cancel(self, job_id: str, owner: str | None) -> JobRecord:
        with self._db.write() as conn:
            job = self._load(conn, job_id, owner, lock=True)
            updated = _cancelled_or_flagged(job)
            if updated is not job:
                self._save(conn, updated)
        return updated

    def is_cancel_requested(self, job_id: str) -> bool:
        with self._db.read() as conn:
            flag = conn.execute(select(_J.cancel_requested).where(_J.id == job_id)).scalar()
        if flag is None:
            raise _not_found(job_id)
        return bool(flag)

    def list(self, owner: str | None, limit: int = 100) -> builtins.list[JobRecord]:
        """Newest first (jobs created in the same microsecond: by id)."""
        _check_limit(limit)
        query = select(*_JOB_COLUMNS)
        if owner is not None:
            query = query.where(_J.owner == owner)
        query = query.order_by(_J.created_at.desc(), _J.id.desc()).limit(limit)
        with self._db.read() as conn:
            rows = conn.execute(query).all()
        return [_job_from_row(row) for row in rows]

    def delete_for_voice(self, voice_id: str, *, keep_kinds: Collection[str] = ()) -> int:
        """Forget every job about a voice (part of deleting the voice) but those
        of ``keep_kinds``: speech jobs are revoked instead
        (:meth:`revoke_for_voices`), so their owner sees why the audio is gone
        and the audio is purged before the row goes."""
        query = delete(t.jobs).where(_J.voice_id == voice_id)
        if keep_kinds:
            query = query.where(_J.kind.not_in(tuple(keep_kinds)))
        with self._db.write() as conn:
            deleted = conn.execute(query).rowcount
        self._db.checkpoint()
        return int(deleted)

    def recover_interrupted(self) -> int:
        """Fail jobs a previous process left queued or running; return how many."""
        with self._db.write() as conn:
            # Queue jobs (with a payload) are not this process's to fail: an
            # expired lease hands them to the next worker (see claim()).
            rows = conn.execute(
                select(*_JOB_COLUMNS)
                .where(_J.state.in_(("queued", "running")), _J.payload_json.is_(None))
                .with_for_update()
            ).all()
            for row in rows:
                self._save(conn, _interrupted(_job_from_row(row)))
        return len(rows)

    # -- the durable queue ------------------------------------------------------
    #
    # Why a table and not Redis (arq/saq): the jobs table already exists in the
    # embedded default (SQLite, no server to run) and is shared by every replica
    # when VOXCLONE_DATABASE_URL points at PostgreSQL, so one mechanism covers
    # both; and the job's state, its queue entry and its lease change in one
    # transaction, so a crash can never leave a job "running" with nobody
    # renewing it forever, or queued twice. A worker claims a job with a lease
    # (claimed_by, lease_expires_at); it renews the lease while it works; a job
    # whose lease ran out (its process died) is claimed again by any worker,
    # until max_attempts tries are spent.

    def enqueue(
        self,
        *,
        kind: str,
        owner: str,
        payload: dict[str, Any],
        max_attempts: int = 3,
        idempotency_key: str | None = None,
        voice_id: str | None = None,
        voice_ids: Sequence[str] = (),
    ) -> tuple[JobRecord, bool]:
        """Queue a job; return (job, created).

        The same owner sending the same ``idempotency_key`` again gets the job
        the first request created (``created`` False); with a different payload
        that is a Conflict, since the key promised the same request.
        ``voice_ids``: every stored voice the job speaks with, linked in the
        same transaction (``voice_id`` defaults to the first).
        """
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        job = queued_job(
            kind,
            owner,
            voice_id if voice_id is not None or not voice_ids else voice_ids[0],
            payload=payload,
            max_attempts=max_attempts,
            run_after=time.time(),
            idempotency_key=idempotency_key,
        )
        if idempotency_key is not None:
            existing = self._idempotent(owner, idempotency_key, kind, payload)
            if existing is not None:
                return existing, False
        try:
            with self._db.write() as conn:
                conn.execute(insert(t.jobs).values(id=job.id, **_row_values(job)))
                job_voices.link(conn, job.id, voice_ids)
        except IntegrityError:
            # A concurrent request with the same key inserted first.
            if idempotency_key is not None:
                existing = self._idempotent(owner, idempotency_key, kind, payload)
                if existing is not None:
                    return existing, False
            raise
        return job, True

    def _idempotent(
        self, owner: str, key: str, kind: str, payload: dict[str, Any]
    ) -> JobRecord | None:
        with self._db.read() as conn:
            row = conn.execute(
                select(*_JOB_COLUMNS).where(_J.owner == owner, _J.idempotency_key == key)
            ).first()
        if row is None:
            return None
        job = _job_from_row(row)
        if job.kind != kind or job.payload != payload:
            raise Conflict(
                "this Idempotency-Key was already used for a different request",
                field="Idempotency-Key",
            )
        return job

    def claim(
        self,
        worker_id: str,
        *,
        kinds: Sequence[str],
        lease_s: float,
        now: float | None = None,
        exclude_owners: Collection[str] = (),
    ) -> JobRecord | None:
        """Take the next runnable job of ``kinds`` for ``worker_id``, or None.

        Next: fair between owners (runtime/job_fairness.py): the owner with the
        fewest running jobs, then the one served longest ago, then the oldest
        job; never a job of ``exclude_owners`` (those this worker already runs).

        Runnable: queued and past its backoff, or running under a lease that
        expired (the worker holding it died). Such an abandoned job is failed
        instead when its attempts are spent, and cancelled when a cancel was
        asked for; then the next candidate is looked at. The claim is atomic:
        on PostgreSQL the row is locked with SKIP LOCKED (workers never wait on
        each other's candidates), on SQLite the write transaction holds the
        database lock; the UPDATE re-checks the state it read either way.
        """
        now = time.time() if now is None else now
        with self._db.write() as conn:
            for _ in range(32):  # bounded: abandoned jobs ended here, then look again
                query = (
                    select(*_JOB_COLUMNS)
                    .where(
                        _J.kind.in_(tuple(kinds)),
                        _J.payload_json.is_not(None),
                        or_(
                            and_(
                                _J.state == "queued",
                                or_(_J.run_after.is_(None), _J.run_after <= now),
                            ),
                            and_(_J.state == "running", _J.lease_expires_at < now),
                        ),
                        not_owned_by(exclude_owners),
                    )
                    .order_by(*fair_order(now))
                    .limit(1)
                )
                if not self._db.is_sqlite:
                    # OF jobs: the fairness subqueries read other rows, never lock them.
                    query = query.with_for_update(skip_locked=True, of=t.jobs)
                row = conn.execute(query).first()
                if row is None:
                    return None
                job = _job_from_row(row)
                abandoned = job.state == "running"
                if abandoned and (job.cancel_requested or job.attempts >= job.max_attempts):
                    self._save_if(conn, job, _abandoned_end(job))
                    continue
                claimed = replace(
                    job,
                    state="running",
                    attempts=job.attempts + 1,
                    claimed_by=worker_id,
                    lease_expires_at=now + lease_s,
                    started_at=now,
                    message="running" if not abandoned else "running again: its worker was lost",
                    updated_at=utc_now_iso(),
                )
                if self._save_if(conn, job, claimed):
                    return claimed
            return None

    def renew(self, job_id: str, worker_id: str, lease_s: float) -> bool:
        """Extend ``worker_id``'s lease; False when it no longer holds the job
        (it expired and another worker took it, or the job ended or was deleted)."""
        with self._db.write() as conn:
            changed = conn.execute(
                update(t.jobs)
                .where(_J.id == job_id, _J.claimed_by == worker_id, _J.state == "running")
                .values(lease_expires_at=time.time() + lease_s)
            ).rowcount
        return bool(changed)

    def update_claimed(self, job_id: str, worker_id: str, **fields: Any) -> JobRecord:
        """:meth:`update` by the worker holding the lease; raises LeaseLost otherwise.

        A terminal state releases the lease.
        """
        with self._db.write() as conn:
            job = self._held(conn, job_id, worker_id)
            updated = _apply_update(job, fields)
            if updated.done:
                updated = replace(updated, claimed_by=None, lease_expires_at=None)
            self._save(conn, updated)
        return updated

    def retry_later(
        self, job_id: str, worker_id: str, *, delay_s: float, error: dict[str, Any]
    ) -> JobRecord:
        """Put a job that failed this attempt back in the queue after ``delay_s``."""
        with self._db.write() as conn:
            job = self._held(conn, job_id, worker_id)
            queued = replace(
                job,
                state="queued",
                message=f"attempt {job.attempts} of {job.max_attempts} failed; "
                f"retrying in {delay_s:.0f} s",
                error=error,
                claimed_by=None,
                lease_expires_at=None,
                run_after=time.time() + delay_s,
                updated_at=utc_now_iso(),
            )
            self._save(conn, queued)
        return queued

    def release(self, job_id: str, worker_id: str) -> JobRecord:
        """Hand a job back to the queue without spending its attempt (clean shutdown)."""
        with self._db.write() as conn:
            job = self._held(conn, job_id, worker_id)
            queued = replace(
                job,
                state="queued",
                message="queued again: its server stopped",
                attempts=max(0, job.attempts - 1),
                claimed_by=None,
                lease_expires_at=None,
                run_after=time.time(),
                updated_at=utc_now_iso(),
            )
            self._save(conn, queued)
        return queued

    # -- the voices a job speaks with (runtime/job_voices.py) -------------------

    def link_voices(self, job_id: str, voice_ids: Collection[str]) -> None:
        """Add links (a worker re-resolving a voice name may find another id)."""
        with self._db.write() as conn:
            job_voices.link(conn, job_id, voice_ids)

    def voices_of(self, job_id: str) -> set[str]:
        with self._db.read() as conn:
            return job_voices.linked(conn, job_id)

    def missing_voices(self, job_id: str) -> set[str]:
        """The voices ``job_id`` speaks with that were deleted since."""
        with self._db.read() as conn:
            return job_voices.missing(conn, job_id)

    def revoke_for_voices(
        self, voice_ids: Collection[str] | None, *, kinds: Sequence[str], error: dict[str, Any]
    ) -> builtins.list[str]:
        """Fail the jobs of ``kinds`` that speak with one of ``voice_ids`` (None:
        with any voice that is gone); return the ids whose audio is owed a purge
        (see :func:`job_voices.revoke`; :meth:`audio_purged` settles one)."""
        with self._db.write() as conn:
            return job_voices.revoke(conn, voice_ids, kinds=kinds, error=error)

    def audio_purged(self, job_id: str) -> None:
        with self._db.write() as conn:
            job_voices.purged(conn, job_id)

    def _held(self, conn: Connection, job_id: str, worker_id: str) -> JobRecord:
        """The job, locked, if ``worker_id`` holds its lease; else LeaseLost."""
        try:
            job = self._load(conn, job_id, None, lock=True)
        except NotFound:
            raise LeaseLost(job_id) from None
        if job.claimed_by != worker_id or job.state != "running":
            raise LeaseLost(job_id)
        return job

    def delete(self, job_id: str, owner: str | None) -> JobRecord:
        """Forget a job (its owner's, or any with ``owner=None``); return what it was."""
        with self._db.write() as conn:
            job = self._load(conn, job_id, owner, lock=True)
            conn.execute(delete(t.jobs).where(_J.id == job_id))
        return job

    def finished_before(
        self, cutoff_iso: str, *, kinds: Sequence[str], limit: int = 100
    ) -> builtins.list[JobRecord]:
        """Ended jobs of ``kinds`` last changed before ``cutoff_iso`` (retention sweep)."""
        query = (
            select(*_JOB_COLUMNS)
            .where(
                _J.kind.in_(tuple(kinds)),
                _J.state.in_(tuple(TERMINAL_STATES)),
                _J.updated_at < cutoff_iso,
            )
            .order_by(_J.updated_at)
            .limit(limit)
        )
        with self._db.read() as conn:
            return [_job_from_row(row) for row in conn.execute(query).all()]

    @staticmethod
    def _save_if(conn: Connection, old: JobRecord, new: JobRecord) -> bool:
        """Save ``new`` only if the row is still as ``old`` was read (state and holder)."""
        holder = (
            _J.claimed_by.is_(None) if old.claimed_by is None else _J.claimed_by == old.claimed_by
        )
        changed = conn.execute(
            update(t.jobs)
            .where(_J.id == old.id, _J.state == old.state, holder)
            .values(**_row_values(new))
        ).rowcount
        return bool(changed)

    @staticmethod
    def _load(conn: Connection, job_id: str, owner: str | None, *, lock: bool = False) -> JobRecord:
        query = select(*_JOB_COLUMNS).where(_J.id == job_id)
        if owner is not None:
            query = query.where(_J.owner == owner)
        if lock:
            # PostgreSQL: two workers updating one job queue here instead of
            # overwriting each other (SQLite already holds the write lock).
            query = query.with_for_update()
        row = conn.execute(query).first()
        if row is None:
            raise _not_found(job_id)
        return _job_from_row(row)

    @staticmethod
    def _save(conn: Connection, job: JobRecord) -> None:
        conn.execute(update(t.jobs).where(_J.id == job.id).values(**_row_values(job)))


# The embedded default is the same class on a SQLite file.
SqliteJobStore = SqlJobStore


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
