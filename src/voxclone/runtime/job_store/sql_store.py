"""Jobs in the voxclone database (SQLite or PostgreSQL); may share it with
the voice library, with its own tables. Survives restarts:
:meth:`SqlJobStore.recover_interrupted` fails the in-process jobs a previous
process left queued or running ("interrupted by restart"), while queue jobs
go to the next worker once their lease expires."""

from __future__ import annotations

import builtins
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, select

from voxclone.runtime.db import Database
from voxclone.runtime.db import tables as t
from voxclone.runtime.job_store.queue import SqlJobQueue
from voxclone.runtime.job_store.records import (
    TERMINAL_STATES,
    JobRecord,
    check_limit,
    not_found,
    queued_job,
)
from voxclone.runtime.job_store.rows import (
    JOB_COLUMNS,
    job_from_row,
    load_job,
    row_values,
    save_job,
)
from voxclone.runtime.job_store.transitions import (
    apply_update,
    cancelled_or_flagged,
    interrupted,
)

_J = t.jobs.c


class SqlJobStore(SqlJobQueue):
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
            conn.execute(insert(t.jobs).values(id=job.id, **row_values(job)))
        return job

    def get(self, job_id: str, owner: str | None) -> JobRecord:
        with self._db.read() as conn:
            return load_job(conn, job_id, owner)

    def update(self, job_id: str, **fields: Any) -> JobRecord:
        with self._db.write() as conn:
            updated = apply_update(load_job(conn, job_id, None, lock=True), fields)
            save_job(conn, updated)
        return updated

    def request_cancel(self, job_id: str, owner: str | None) -> JobRecord:
        with self._db.write() as conn:
            job = load_job(conn, job_id, owner, lock=True)
            updated = cancelled_or_flagged(job)
            if updated is not job:
                save_job(conn, updated)
        return updated

    def is_cancel_requested(self, job_id: str) -> bool:
        with self._db.read() as conn:
            flag = conn.execute(select(_J.cancel_requested).where(_J.id == job_id)).scalar()
        if flag is None:
            raise not_found(job_id)
        return bool(flag)

    def list(self, owner: str | None, limit: int = 100) -> builtins.list[JobRecord]:
        """Newest first (jobs created in the same microsecond: by id)."""
        check_limit(limit)
        query = select(*JOB_COLUMNS)
        if owner is not None:
            query = query.where(_J.owner == owner)
        query = query.order_by(_J.created_at.desc(), _J.id.desc()).limit(limit)
        with self._db.read() as conn:
            rows = conn.execute(query).all()
        return [job_from_row(row) for row in rows]

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
                select(*JOB_COLUMNS)
                .where(_J.state.in_(("queued", "running")), _J.payload_json.is_(None))
                .with_for_update()
            ).all()
            for row in rows:
                save_job(conn, interrupted(job_from_row(row)))
        return len(rows)

    def delete(self, job_id: str, owner: str | None) -> JobRecord:
        """Forget a job (its owner's, or any with ``owner=None``); return what it was."""
        with self._db.write() as conn:
            job = load_job(conn, job_id, owner, lock=True)
            conn.execute(delete(t.jobs).where(_J.id == job_id))
        return job

    def finished_before(
        self, cutoff_iso: str, *, kinds: Sequence[str], limit: int = 100
    ) -> builtins.list[JobRecord]:
        """Ended jobs of ``kinds`` last changed before ``cutoff_iso`` (retention sweep)."""
        query = (
            select(*JOB_COLUMNS)
            .where(
                _J.kind.in_(tuple(kinds)),
                _J.state.in_(tuple(TERMINAL_STATES)),
                _J.updated_at < cutoff_iso,
            )
            .order_by(_J.updated_at)
            .limit(limit)
        )
        with self._db.read() as conn:
            return [job_from_row(row) for row in conn.execute(query).all()]

    def changed_before(
        self, cutoff_iso: str, *, kinds: Sequence[str], limit: int = 100
    ) -> builtins.list[JobRecord]:
        """Jobs of ``kinds`` in any state last changed before ``cutoff_iso``,
        oldest first: parent rows that never end themselves (an audiobook's,
        service/audiobook_expiry.py) checked for expiry."""
        query = (
            select(*JOB_COLUMNS)
            .where(_J.kind.in_(tuple(kinds)), _J.updated_at < cutoff_iso)
            .order_by(_J.updated_at)
            .limit(limit)
        )
        with self._db.read() as conn:
            return [job_from_row(row) for row in conn.execute(query).all()]


# The embedded default is the same class on a SQLite file.
SqliteJobStore = SqlJobStore
