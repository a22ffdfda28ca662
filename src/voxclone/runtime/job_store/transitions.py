"""How a job's record changes: a worker's update checked against the job's
state, a cancel, a job interrupted by a restart, a job whose worker died."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from voxclone.errors import Conflict, InvalidInput
from voxclone.runtime.job_store.records import INTERRUPTED_MESSAGE, JOB_STATES, JobRecord
from voxclone.runtime.voice_store import utc_now_iso

# Fields a worker may change through update(); id, owner, kind, voice and
# creation time are fixed when the job is created.
_UPDATABLE_FIELDS = frozenset({"state", "progress", "message", "result", "error"})


def apply_update(job: JobRecord, fields: dict[str, Any]) -> JobRecord:
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


def interrupted(job: JobRecord) -> JobRecord:
    return replace(
        job,
        state="failed",
        message=INTERRUPTED_MESSAGE,
        error={"code": "interrupted", "message": INTERRUPTED_MESSAGE},
        updated_at=utc_now_iso(),
    )


def abandoned_end(job: JobRecord) -> JobRecord:
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


def cancelled_or_flagged(job: JobRecord) -> JobRecord:
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
