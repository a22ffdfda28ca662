"""What a job is: its record, its states, the :class:`JobStore` protocol both
stores implement, and :class:`LeaseLost` for a worker that lost its claim."""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from voxclone.errors import InvalidInput, NotFound
from voxclone.runtime.voice_store import utc_now_iso

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JOB_STATES: frozenset[str] = frozenset({"queued", "running", "succeeded", "failed", "cancelled"})
TERMINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
INTERRUPTED_MESSAGE = "interrupted by restart"
LIST_MAX_LIMIT = 1000


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


def not_found(job_id: str) -> NotFound:
    # Same answer for a missing job and another owner's job.
    return NotFound(f"job {job_id[:40]!r} not found", field="job_id")


def check_limit(limit: int) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= LIST_MAX_LIMIT:
        raise InvalidInput(
            f"limit must be between 1 and {LIST_MAX_LIMIT}", field="limit", limit=LIST_MAX_LIMIT
        )


class LeaseLost(Exception):
    """The worker no longer holds the job's lease (expired and taken over, or
    the job was cancelled, deleted or ended): it must stop and write nothing."""
