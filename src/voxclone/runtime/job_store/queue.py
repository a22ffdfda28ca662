"""The durable queue on the ``jobs`` table: any voxclone process enqueues,
claims (with a lease), renews, finishes, retries or hands back a job; and the
voices each queued job speaks with (``voice_links``).

Why a table and not Redis (arq/saq): the jobs table already exists in the
embedded default (SQLite, no server to run) and is shared by every replica
when VOXCLONE_DATABASE_URL points at PostgreSQL, so one mechanism covers
both; and the job's state, its queue entry and its lease change in one
transaction, so a crash can never leave a job "running" with nobody
renewing it forever, or queued twice. A worker claims a job with a lease
(claimed_by, lease_expires_at); it renews the lease while it works; a job
whose lease ran out (its process died) is claimed again by any worker,
until max_attempts tries are spent.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, and_, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from voxclone.errors import Conflict, NotFound
from voxclone.runtime.db import tables as t
from voxclone.runtime.db.repository import Repository
from voxclone.runtime.job_store import voice_links
from voxclone.runtime.job_store.fairness import fair_order, not_owned_by
from voxclone.runtime.job_store.records import JobRecord, LeaseLost, queued_job
from voxclone.runtime.job_store.rows import (
    JOB_COLUMNS,
    job_from_row,
    load_job,
    row_values,
    save_job,
    save_job_if,
)
from voxclone.runtime.job_store.transitions import abandoned_end, apply_update
from voxclone.runtime.voice_store import utc_now_iso

_J = t.jobs.c


class SqlJobQueue(Repository):
    """The queue operations of :class:`~voxclone.runtime.job_store.sql_store.SqlJobStore`
    (its base; with it, the SQL side of the
    :class:`~voxclone.runtime.job_store.records.JobQueue` protocol)."""

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
                conn.execute(insert(t.jobs).values(id=job.id, **row_values(job)))
                voice_links.link(conn, job.id, voice_ids)
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
                select(*JOB_COLUMNS).where(_J.owner == owner, _J.idempotency_key == key)
            ).first()
        if row is None:
            return None
        job = job_from_row(row)
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

        Next: fair between owners (fairness.py): the owner with the
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
                    select(*JOB_COLUMNS)
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
                job = job_from_row(row)
                abandoned = job.state == "running"
                if abandoned and (job.cancel_requested or job.attempts >= job.max_attempts):
                    save_job_if(conn, job, abandoned_end(job))
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
                if save_job_if(conn, job, claimed):
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
            updated = apply_update(job, fields)
            if updated.done:
                updated = replace(updated, claimed_by=None, lease_expires_at=None)
            save_job(conn, updated)
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
            save_job(conn, queued)
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
            save_job(conn, queued)
        return queued

    # -- the voices a job speaks with (voice_links.py) ---------------------------

    def link_voices(self, job_id: str, voice_ids: Collection[str]) -> None:
        """Add links (a worker re-resolving a voice name may find another id)."""
        with self._db.write() as conn:
            voice_links.link(conn, job_id, voice_ids)

    def voices_of(self, job_id: str) -> set[str]:
        with self._db.read() as conn:
            return voice_links.linked(conn, job_id)

    def missing_voices(self, job_id: str) -> set[str]:
        """The voices ``job_id`` speaks with that were deleted since."""
        with self._db.read() as conn:
            return voice_links.missing(conn, job_id)

    def revoke_for_voices(
        self, voice_ids: Collection[str] | None, *, kinds: Sequence[str], error: dict[str, Any]
    ) -> builtins.list[str]:
        """Fail the jobs of ``kinds`` that speak with one of ``voice_ids`` (None:
        with any voice that is gone); return the ids whose audio is owed a purge
        (see :func:`voice_links.revoke`; :meth:`audio_purged` settles one)."""
        with self._db.write() as conn:
            return voice_links.revoke(conn, voice_ids, kinds=kinds, error=error)

    def audio_purged(self, job_id: str) -> None:
        with self._db.write() as conn:
            voice_links.purged(conn, job_id)

    def _held(self, conn: Connection, job_id: str, worker_id: str) -> JobRecord:
        """The job, locked, if ``worker_id`` holds its lease; else LeaseLost."""
        try:
            job = load_job(conn, job_id, None, lock=True)
        except NotFound:
            raise LeaseLost(job_id) from None
        if job.claimed_by != worker_id or job.state != "running":
            raise LeaseLost(job_id)
        return job
