"""Jobs in process memory (tests, throw-away servers)."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Collection
from typing import Any

from voxclone.runtime.job_store.records import (
    JobRecord,
    check_limit,
    not_found,
    queued_job,
)
from voxclone.runtime.job_store.transitions import apply_update, cancelled_or_flagged


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
            raise not_found(job_id)
        return job

    def update(self, job_id: str, **fields: Any) -> JobRecord:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise not_found(job_id)
            updated = apply_update(job, fields)
            self._jobs[job_id] = updated
        return updated

    def request_cancel(self, job_id: str, owner: str | None) -> JobRecord:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or (owner is not None and job.owner != owner):
                raise not_found(job_id)
            updated = cancelled_or_flagged(job)
            self._jobs[job_id] = updated
        return updated

    def is_cancel_requested(self, job_id: str) -> bool:
        return self.get(job_id, None).cancel_requested

    def list(self, owner: str | None, limit: int = 100) -> builtins.list[JobRecord]:
        """Newest first."""
        check_limit(limit)
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
