"""The report job of a ``wait=false`` enrollment, durable across crashes.

``POST /v1/voices`` with ``wait=false`` stores the atlas-lookup voice at once
(``quality.report_pending``) and measures it in a report job: pitch
calibration, tone match, the quality report (~5 s), stored as version 2.
That job used to live only in the process's memory: killed mid-report, the
job was failed at the next start ("interrupted by restart") and the voice
stayed ``report_pending`` forever (issue 37).

Report jobs are now entries of the durable queue (runtime/job_store/), as
speech jobs are: a worker claims one with a lease and renews it while it
measures; a job whose worker died is claimed again once the lease expires,
by this process after a restart or by another replica, until its attempts are
spent. Every process with a style engine polls for them (:data:`POLL_S`).

What a report needs that the voice record does not hold: the cleaned
recordings. The enrolling process keeps them in memory for its own job
(:class:`ReportInputs`); a job taken over after a crash measures the stored
voice print instead (embedding, pitch, spectrum: the same atlas lookup), with
the recording's own warnings as enrollment stored them, and, when the raw
recording was kept (``keep_reference``), the recording itself. Without it the
several-speakers check cannot run again; the report says so
(``quality.report_resumed``).

A report that ends without a measurement (failed for good, cancelled)
settles the voice: ``report_pending`` goes and ``report_error`` says why, so
no voice waits for a report that will never come. A voice whose report jobs
are all gone (a crash before its job was queued; jobs of older versions,
which were not durable) is found by :func:`stranded_voices` at start-up.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from voxclone.errors import Cancelled, NotFound, VoxcloneError
from voxclone.runtime.job_store import JobEvents, JobQueue, JobRecord, LeaseLost
from voxclone.runtime.voice_store import VoiceStore, VoiceSummary
from voxclone.synth.audio.reference import ReferenceAudio, combine_references
from voxclone.synth.voice.pipeline import ClonedVoice, VoicePrint

log = logging.getLogger(__name__)

REPORT_JOB_KIND = "report"
LEASE_S = 30.0  # renewed every LEASE_S / 3 while the report runs
POLL_S = 10.0  # how often abandoned (or other processes') report jobs are looked for
MAX_ATTEMPTS = 3
RETRY_BASE_S = 5.0
RESUMED_NOTE = (
    "measured again after the enrolling process stopped, from the stored voice print; "
    "the recording was not kept, so it was not checked again for several speakers"
)
_PAGE = 500
ISO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # runtime/voice_store.utc_now_iso's


@dataclass(frozen=True)
class ReportInputs:
    """What the enrolling process holds in memory for its own report job."""

    references: Sequence[ReferenceAudio]
    draft: ClonedVoice


@dataclass(frozen=True)
class ReportTask:
    """A claimed report job, read back from its payload."""

    job: JobRecord
    voice_id: str
    owner: str
    version: int  # the voice version the draft was stored as
    match_tone: bool
    keep_clone: bool
    refine_job_id: str | None
    inputs: ReportInputs | None  # None: measured from the stored voice print


def report_payload(
    voice_id: str, version: int, *, match_tone: bool, keep_clone: bool, refine_job_id: str | None
) -> dict[str, Any]:
    return {
        "voice_id": voice_id,
        "version": version,
        "match_tone": match_tone,
        "keep_clone": keep_clone,
        "refine_job_id": refine_job_id,
    }


def task_of(job: JobRecord, inputs: ReportInputs | None) -> ReportTask:
    payload = job.payload or {}
    refine = payload.get("refine_job_id")
    return ReportTask(
        job=job,
        voice_id=str(payload.get("voice_id") or job.voice_id or ""),
        owner=job.owner,
        version=int(payload.get("version", 1)),
        match_tone=bool(payload.get("match_tone", True)),
        keep_clone=bool(payload.get("keep_clone", False)),
        refine_job_id=str(refine) if refine else None,
        inputs=inputs,
    )


def mark_pending(quality: dict[str, Any], references: Sequence[ReferenceAudio]) -> None:
    """The draft's quality: pending, plus what a report made from the stored
    print alone needs of the recording (its SNR; its warnings are there already)."""
    quality["report_pending"] = True
    snr = combine_references(references).snr_db
    if math.isfinite(snr):
        quality["snr_db"] = round(float(snr), 2)


def stand_in_reference(quality: dict[str, Any], voice_print: VoicePrint) -> ReferenceAudio:
    """The recording as the report sees it when only the stored voice is left:
    its warnings and SNR as enrollment stored them and no samples (so the
    several-speakers check, which needs them, is skipped)."""
    snr = quality.get("snr_db")
    return ReferenceAudio(
        samples16k=np.zeros(0, np.float32),
        speech_seconds=voice_print.speech_seconds,
        original_seconds=voice_print.speech_seconds,
        snr_db=float(snr) if isinstance(snr, int | float) else math.nan,
        clipping=0.0,  # a clipping warning is among the stored warnings already
        warnings=[str(w) for w in quality.get("warnings", [])],
    )


def stranded_voices(
    store: VoiceStore, jobs: JobQueue, *, settled_before: str
) -> Iterator[tuple[VoiceSummary, JobRecord | None]]:
    """Voices still ``report_pending`` with no report job queued or running,
    each with its latest report job (None: it has none). Voices changed at or
    after ``settled_before`` (a store timestamp) are left alone: their
    enrollment may be queuing its job."""
    cutoff = settled_before
    offset = 0
    while True:
        page = store.list(None, limit=_PAGE, offset=offset)
        offset += len(page)
        for voice in page:
            if voice.quality.get("report_pending") is not True or voice.updated_at >= cutoff:
                continue
            reports = [
                j
                for j in jobs.list(voice.owner, limit=1000)
                if j.voice_id == voice.id and j.kind == REPORT_JOB_KIND
            ]
            if not any(not j.done for j in reports):
                yield voice, (reports[0] if reports else None)
        if len(page) < _PAGE:
            return


class ReportLease:
    """A claimed report job: written only while this worker still holds it
    (LeaseLost otherwise: another worker took it over, or it was deleted)."""

    def __init__(self, jobs: JobQueue, events: JobEvents, job: JobRecord, worker: str) -> None:
        self._jobs, self._events, self.job, self._worker = jobs, events, job, worker

    def update(self, **fields: Any) -> None:
        self._events.publish(self._jobs.update_claimed(self.job.id, self._worker, **fields))

    # A terminal state, written the same way (update_claimed then releases the lease).
    finish = update

    def release(self) -> None:
        """Back to the queue without spending the attempt (this process stops)."""
        self._events.publish(self._jobs.release(self.job.id, self._worker))

    def retry_later(self, delay_s: float, error: dict[str, Any]) -> None:
        self._events.publish(
            self._jobs.retry_later(self.job.id, self._worker, delay_s=delay_s, error=error)
        )


# (task, lease) -> the stored voice once measured; raises when it was not.
Measure = Callable[[ReportTask, ReportLease], Any]
# (task, the measured voice or None, why not) after the job ended for good.
After = Callable[[ReportTask, Any, str | None], None]


class ReportQueue:
    """Queues report jobs and runs them, one at a time, on its own thread (a
    ~5 s report must not wait behind a refinement of minutes)."""

    def __init__(
        self,
        jobs: JobQueue,
        events: JobEvents,
        *,
        measure: Measure,
        after: After,
        closing: threading.Event,
        worker_id: str,
        lease_s: float | None = None,
        poll_s: float | None = None,
        on_start: Callable[[], None] | None = None,
    ) -> None:
        self._jobs = jobs
        self._events = events
        self._measure = measure
        self._after = after
        self._closing = closing
        self.worker_id = worker_id
        # Read when built (not as defaults), so a test can shorten them.
        self._lease_s = LEASE_S if lease_s is None else lease_s
        self._poll_s = POLL_S if poll_s is None else poll_s
        self._on_start = on_start
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="report")
        self._lock = threading.Lock()
        self._inputs: dict[str, ReportInputs] = {}
        self._poller: threading.Thread | None = None

    # -- producer side ------------------------------------------------------------
    def submit(
        self,
        voice_id: str,
        owner: str,
        version: int,
        inputs: ReportInputs | None,
        *,
        match_tone: bool = True,
        keep_clone: bool = False,
        refine_job_id: str | None = None,
    ) -> JobRecord:
        payload = report_payload(
            voice_id,
            version,
            match_tone=match_tone,
            keep_clone=keep_clone,
            refine_job_id=refine_job_id,
        )
        with self._lock:  # see _drain: an entry is never dropped while its job is new
            job, _ = self._jobs.enqueue(
                kind=REPORT_JOB_KIND,
                owner=owner,
                payload=payload,
                max_attempts=MAX_ATTEMPTS,
                voice_id=voice_id,
            )
            if inputs is not None:
                self._inputs[job.id] = inputs
        self._events.publish(job)
        self._kick()
        return job

    def start(self) -> None:
        """Poll for report jobs in the background (the first look is at once:
        jobs a crashed process left, and ``on_start``'s stranded voices)."""
        if self._poller is not None:
            return

        def poll() -> None:
            if self._on_start is not None:
                try:
                    self._on_start()
                except Exception:  # a bad moment of the database: the next start retries
                    log.exception("looking for voices whose report never came failed")
            while True:
                self._kick()
                if self._closing.wait(self._poll_s * random.uniform(0.8, 1.2)):
                    return

        self._poller = threading.Thread(target=poll, name="report-poller", daemon=True)
        self._poller.start()

    def close(self) -> None:
        """Stop polling; a report running now goes back to the queue (the
        caller set ``closing`` first, which the measurement checks)."""
        self._closing.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _kick(self) -> None:
        if self._closing.is_set():
            return
        with contextlib.suppress(RuntimeError):  # shut down meanwhile
            self._executor.submit(self._drain)

    # -- worker side --------------------------------------------------------------
    def _drain(self) -> None:
        """Run report jobs until none is runnable."""
        try:
            while not self._closing.is_set():
                with self._lock:
                    job = self._jobs.claim(
                        self.worker_id, kinds=(REPORT_JOB_KIND,), lease_s=self._lease_s
                    )
                    if job is None:
                        self._forget_lost_inputs()
                        return
                    inputs = self._inputs.pop(job.id, None)
                self._events.publish(job)
                self._run(task_of(job, inputs))
        except Exception:  # the next poll tries again; never let the thread die silently
            log.exception("running report jobs failed")

    def _forget_lost_inputs(self) -> None:
        """Drop what this process kept for jobs it will not run: ended, deleted,
        or taken by another worker. Kept: jobs queued again for a retry."""
        for job_id in list(self._inputs):
            try:
                job = self._jobs.get(job_id, None)
            except NotFound:
                job = None
            if job is None or job.done or job.claimed_by not in (None, self.worker_id):
                del self._inputs[job_id]

    def _run(self, task: ReportTask) -> None:
        lease = ReportLease(self._jobs, self._events, task.job, self.worker_id)
        done = threading.Event()
        beat = threading.Thread(
            target=self._heartbeat, args=(task.job.id, done), name="report-lease", daemon=True
        )
        beat.start()
        try:
            self._measured(task, lease)
        except LeaseLost:
            pass  # another worker holds it now (or it was deleted): not ours to end
        except Exception:  # e.g. settling the voice failed: the next job still runs
            log.exception("ending a report job failed", extra={"job_id": task.job.id})
        finally:
            done.set()
            beat.join(timeout=5)

    def _heartbeat(self, job_id: str, done: threading.Event) -> None:
        while not done.wait(self._lease_s / 3):
            try:
                if not self._jobs.renew(job_id, self.worker_id, self._lease_s):
                    return  # lost: the next write raises LeaseLost
            except Exception:
                log.warning("could not renew a report job's lease", exc_info=True)

    def _measured(self, task: ReportTask, lease: ReportLease) -> None:
        try:
            measured = self._measure(task, lease)
        except (Cancelled, NotFound) as exc:
            if self._closing.is_set():
                lease.release()  # measured again by the next process (or replica)
                return
            why = "the voice was deleted" if isinstance(exc, NotFound) else "cancelled"
            self._end(task, lease, why, state="cancelled", message=why)
        except VoxcloneError as exc:
            if exc.status < 500:  # another try would be refused the same way
                error = exc.to_body()["error"]
                self._end(
                    task, lease, exc.message, state="failed", message=exc.message, error=error
                )
            else:
                self._retry_or_fail(task, lease, exc.to_body()["error"])
        except Exception as exc:
            log.exception("report job attempt failed", extra={"job_id": task.job.id})
            error = {"code": "internal_error", "message": f"internal error ({type(exc).__name__})"}
            self._retry_or_fail(task, lease, error)
        else:
            self._after(task, measured, None)

    def _retry_or_fail(self, task: ReportTask, lease: ReportLease, error: dict[str, Any]) -> None:
        attempts = task.job.attempts
        if attempts >= task.job.max_attempts:
            message = f"failed after {attempts} attempts: {error.get('message', '')}"[:500]
            self._end(task, lease, message, state="failed", message=message, error=error)
            return
        if task.inputs is not None:
            with self._lock:  # the retry, here or elsewhere, may still use them
                self._inputs[task.job.id] = task.inputs
        lease.retry_later(RETRY_BASE_S * 2 ** (attempts - 1) * random.uniform(0.8, 1.2), error)

    def _end(self, task: ReportTask, lease: ReportLease, why: str, **fields: Any) -> None:
        lease.finish(**fields)
        self._after(task, None, why)


def settled_before(now: float | None = None) -> str:
    """Voices changed since this are too fresh for :func:`stranded_voices` (in
    the voice store's timestamp format, ``utc_now_iso``, so that they compare)."""
    moment = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    return (moment - timedelta(seconds=LEASE_S)).strftime(ISO_FORMAT)
