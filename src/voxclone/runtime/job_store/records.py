"""What a job is: its record, its states, the :class:`JobStore` protocol both
stores implement, the :class:`JobQueue` protocol of the durable queue, and
:class:`LeaseLost` for a worker that lost its claim."""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Collection, Sequence
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


@runtime_checkable
class JobQueue(JobStore, Protocol):
    """The durable queue on top of job state: what the speech-job worker, the
    audiobooks and the queued quality reports use (``SqlJobStore`` implements
    it; its queue operations come from ``queue.SqlJobQueue``).

    Queue jobs carry a payload and are claimed with a lease by any process;
    a worker that loses its lease gets :class:`LeaseLost` from the calls
    that take its ``worker_id``.
    """

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
    ) -> tuple[JobRecord, bool]: ...

    def claim(
        self,
        worker_id: str,
        *,
        kinds: Sequence[str],
        lease_s: float,
        now: float | None = None,
        exclude_owners: Collection[str] = (),
    ) -> JobRecord | None: ...

    def renew(self, job_id: str, worker_id: str, lease_s: float) -> bool: ...

    def update_claimed(self, job_id: str, worker_id: str, **fields: Any) -> JobRecord: ...

    def retry_later(
        self, job_id: str, worker_id: str, *, delay_s: float, error: dict[str, Any]
    ) -> JobRecord: ...

    def release(self, job_id: str, worker_id: str) -> JobRecord: ...

    def link_voices(self, job_id: str, voice_ids: Collection[str]) -> None: ...

    def voices_of(self, job_id: str) -> set[str]: ...

    def missing_voices(self, job_id: str) -> set[str]: ...

    def revoke_for_voices(
        self, voice_ids: Collection[str] | None, *, kinds: Sequence[str], error: dict[str, Any]
    ) -> builtins.list[str]: ...

    def audio_purged(self, job_id: str) -> None: ...

    def delete(self, job_id: str, owner: str | None) -> JobRecord: ...

    def finished_before(
        self, cutoff_iso: str, *, kinds: Sequence[str], limit: int = 100
    ) -> builtins.list[JobRecord]: ...

    def changed_before(
        self, cutoff_iso: str, *, kinds: Sequence[str], limit: int = 100
    ) -> builtins.list[JobRecord]: ...


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
