"""A job as a row of the ``jobs`` table: the columns read, the values
written, and loading / saving one row inside a transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select, update

from voxclone.errors import InvalidInput
from voxclone.runtime.db import tables as t
from voxclone.runtime.job_store.records import JobRecord, not_found

_J = t.jobs.c
JOB_COLUMNS = (
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


def job_from_row(row: Sequence[Any]) -> JobRecord:
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


def row_values(job: JobRecord) -> dict[str, Any]:
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


def load_job(conn: Connection, job_id: str, owner: str | None, *, lock: bool = False) -> JobRecord:
    query = select(*JOB_COLUMNS).where(_J.id == job_id)
    if owner is not None:
        query = query.where(_J.owner == owner)
    if lock:
        # PostgreSQL: two workers updating one job queue here instead of
        # overwriting each other (SQLite already holds the write lock).
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None:
        raise not_found(job_id)
    return job_from_row(row)


def save_job(conn: Connection, job: JobRecord) -> None:
    conn.execute(update(t.jobs).where(_J.id == job.id).values(**row_values(job)))


def save_job_if(conn: Connection, old: JobRecord, new: JobRecord) -> bool:
    """Save ``new`` only if the row is still as ``old`` was read (state and holder)."""
    holder = _J.claimed_by.is_(None) if old.claimed_by is None else _J.claimed_by == old.claimed_by
    changed = conn.execute(
        update(t.jobs)
        .where(_J.id == old.id, _J.state == old.state, holder)
        .values(**row_values(new))
    ).rowcount
    return bool(changed)
