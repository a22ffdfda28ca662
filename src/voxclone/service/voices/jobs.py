"""The voice service's own jobs (refinements, reports): each change stored and
published to its watchers, ended in a terminal state whatever happens, and
told when to stop: at shutdown, when cancelled, or when its voice is deleted."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from voxclone.errors import Cancelled, NotFound, VoxcloneError
from voxclone.runtime.job_store import JobEvents, JobRecord, JobStore
from voxclone.runtime.voice_store import VoiceRecord

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class VoiceJobs:
    def __init__(self, jobs: JobStore, events: JobEvents, closing: threading.Event) -> None:
        """``closing`` is the owning service's shutdown flag."""
        self._jobs = jobs
        self._events = events
        self._closing = closing
        self._deleted_lock = threading.Lock()
        self._deleted: set[str] = set()

    def new(self, kind: str, record: VoiceRecord) -> JobRecord:
        job = self._jobs.create(kind=kind, owner=record.owner, voice_id=record.id)
        self.publish(job)
        return job

    def get(self, job_id: str, owner: str | None) -> JobRecord:
        return self._jobs.get(job_id, owner)

    def cancel(self, job_id: str, owner: str) -> JobRecord:
        job = self._jobs.request_cancel(job_id, owner)
        self.publish(job)
        return job

    def update(self, job_id: str, **fields: Any) -> None:
        self.publish(self._jobs.update(job_id, **fields))

    def finish(self, job_id: str, **fields: Any) -> None:
        # Deleted with its voice, or already terminal (e.g. cancelled while queued).
        with contextlib.suppress(VoxcloneError):
            self.update(job_id, **fields)

    def publish(self, job: JobRecord) -> None:
        self._events.publish(job)

    def voice_deleted(self, voice_id: str) -> None:
        """Running jobs of ``voice_id`` see this (``should_stop``) and stop."""
        with self._deleted_lock:
            self._deleted.add(voice_id)

    def should_stop(self, job_id: str, voice_id: str) -> bool:
        if self._closing.is_set():
            return True
        with self._deleted_lock:
            if voice_id in self._deleted:
                return True
        try:
            return self._jobs.is_cancel_requested(job_id)
        except NotFound:
            return True

    def guarded(self, job_id: str, activity: str, body: Callable[[], _T]) -> _T | None:
        """Run a background job's ``body`` (None: it did not succeed); whatever
        happens, the job ends in a terminal state."""
        try:
            return body()
        except Cancelled:
            self.finish(job_id, state="cancelled", message="cancelled")
        except NotFound:
            self.finish(job_id, state="cancelled", message="the voice was deleted")
        except VoxcloneError as exc:
            self.finish(job_id, state="failed", message=exc.message, error=exc.to_body()["error"])
        except Exception:  # a background job must always end in a terminal state
            log.exception("%s failed", activity, extra={"job_id": job_id})
            message = f"internal error while {activity}"
            self.finish(
                job_id,
                state="failed",
                message=message,
                error={"code": "internal_error", "message": message},
            )
        return None
