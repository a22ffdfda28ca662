"""Speech jobs: long texts rendered in the background, durable across restarts.

``POST /v1/jobs/speech`` queues a job in the database (runtime/job_store/,
the durable queue); a :class:`JobWorker` in every server process (unless turned
off for API-only replicas) claims jobs with a lease, renders them through the
same :class:`SpeechRouter` as ``/v1/tts`` (whole-file path), reports progress,
and stores the audio in the blob store under ``jobs/<job id>.<ext>``.

What survives what:

* the process dies mid-job: its lease stops being renewed and expires; any
  worker (this machine after a restart, or another replica) claims the job
  again and renders it from the start, until ``max_attempts`` tries are spent;
  then the job is failed with ``worker_lost`` — never left "running";
* rendering fails (engine error): retried with exponential backoff, then
  failed with the last error; a request error (bad voice, text too long) fails
  at once, since another try would fail the same way;
* the process stops cleanly mid-job: the job goes back to the queue without
  spending an attempt;
* a voice the job speaks with is deleted: the job is revoked (failed,
  ``voice_deleted``) and its audio deleted, whether it was queued, running or
  done (service/job_voices.py); a render that ends after the delete
  checks its voices once its audio is stored and deletes it.

Fairness: the claim serves the tenant with the fewest running jobs, then the
one served longest ago (runtime/job_store/fairness.py), and a :class:`JobWorker`
runs up to ``slots`` jobs at once, never two of one owner: a short job of
another tenant starts while a long one renders, and their chunks take turns
on the engine (background priority, first come within it).
"""

from __future__ import annotations

import logging
import math
import os
import random
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

from voxclone.errors import Cancelled, NotFound, VoxcloneError
from voxclone.runtime.blobs import BlobStore
from voxclone.runtime.job_store import JobEvents, JobQueue, JobRecord, LeaseLost
from voxclone.service.audiobook_expiry import expire_books, retention_cutoff
from voxclone.service.dialogue import (
    UNMARKED_FIELD,
    Dialogue,
    Dialogues,
    PreparedDialogue,
    SpeakerWord,
    is_dialogue,
)
from voxclone.service.job_voices import (
    SPEECH_JOB_KIND,
    VOICE_DELETED_ERROR,
    spoken_voice_ids,
)
from voxclone.service.job_words import WORDS_CONTENT_TYPE, dump_words, words_key
from voxclone.service.speech.output_length import OUTGROW_FLOOR_S, allowance
from voxclone.service.speech.pricing import released_at_end
from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.audio.file_encode import file_extension
from voxclone.synth.controls import SpeechControls

if TYPE_CHECKING:
    from voxclone.service.speech.router import SpeechRouter

log = logging.getLogger(__name__)

JOB_BLOB_PREFIX = "jobs/"
# Where a job's payload keeps its estimate ({"units", "output_s"}), priced
# when it was queued; its render is held to it (service/speech/output_length.py).
ESTIMATE_FIELD = "estimate"
# A blob prefix of files made from a job's audio (an audiobook's assembled
# M4B: service/audiobooks.py), purged with the job's own audio when a voice it
# speaks with is deleted: the deletion leaves none of that voice's speech.
PURGE_WITH_FIELD = "purge_with"
# A dialogue job that records its words (service/job_words.py): an audiobook's
# chapter, whose words the book serves in its own timeline.
WORDS_FIELD = "record_words"
# A job's audio stays in memory up to this size, then goes to a temporary file.
SPOOL_MEMORY_BYTES = 16 << 20


@dataclass(frozen=True)
class SpeechJobConfig:
    lease_s: float = 30.0
    max_attempts: int = 3
    retry_base_s: float = 5.0
    retry_max_s: float = 300.0
    # Ended jobs and their audio are deleted this long after they ended (0: never).
    retention_s: float = 7 * 24 * 3600.0
    # Audio a render may make beyond OUTGROW_FACTOR times its estimate
    # before it is stopped (service/speech/output_length.py).
    outgrow_floor_s: float = OUTGROW_FLOOR_S


def request_payload(req: SpeechRequest) -> dict[str, Any]:
    """What a worker needs to render ``req`` again, as JSON (no inline voices)."""
    c = req.controls
    return {
        "text": req.text,
        "voice": req.voice,
        "language": req.language,
        "model": req.model,
        "format": req.format,
        "sample_rate": req.sample_rate,
        "controls": {
            "speed": c.speed,
            "pitch": c.pitch,
            "energy": c.energy,
            "emotion": c.emotion,
            "intensity": c.intensity,
        },
        UNMARKED_FIELD: req.unmarked,
    }


def request_of(payload: dict[str, Any], owner: str) -> SpeechRequest:
    return SpeechRequest(
        text=payload["text"],
        voice=payload.get("voice"),
        language=payload.get("language"),
        model=payload.get("model"),
        format=payload.get("format", "wav"),
        sample_rate=int(payload.get("sample_rate", 24_000)),
        controls=SpeechControls(**payload.get("controls", {})),
        owner=owner,
        unmarked=bool(payload.get(UNMARKED_FIELD, False)),
    )


def blob_key(job: JobRecord) -> str:
    fmt = (job.payload or {}).get("format", "wav")
    return f"{JOB_BLOB_PREFIX}{job.id}.{file_extension(fmt)}"


def default_worker_id() -> str:
    """Host, process and a random tag: unique across replicas and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{random.getrandbits(32):08x}"


class SpeechJobs:
    """Submit, run, delete and expire speech jobs."""

    def __init__(
        self,
        *,
        queue: JobQueue,
        speech: SpeechRouter,
        blobs: BlobStore,
        events: JobEvents,
        config: SpeechJobConfig | None = None,
        worker_id: str | None = None,
        voice_ids: Callable[[SpeechRequest], Sequence[str]] | None = None,
    ) -> None:
        """``voice_ids``: the stored voices a request speaks with (default:
        resolved through ``speech``'s catalog, service/job_voices.py)."""
        self._queue = queue
        self._speech = speech
        self._blobs = blobs
        self._events = events
        self.config = config or SpeechJobConfig()
        self.worker_id = worker_id or default_worker_id()
        self._stopping = threading.Event()
        self._voice_ids = voice_ids or self._catalog_voice_ids
        # Owners of the jobs this process is running (JobWorker slots): the
        # next claim skips them, so a second slot serves another tenant.
        self._running: Counter[str] = Counter()
        self._claiming = threading.Lock()

    @property
    def blobs(self) -> BlobStore:
        return self._blobs

    # -- API side ---------------------------------------------------------------
    def submit(
        self, req: SpeechRequest, *, idempotency_key: str | None = None
    ) -> tuple[JobRecord, bool]:
        """Validate ``req`` now (bad voice, format, text → 4xx here, not a failed
        job later) and queue it; return (job, created)."""
        if req.owner is None:
            raise ValueError("a speech job needs an owner")
        # Resolves voice, language, format and prices the text as spoken
        # (lexicon, SSML, numbers, speed, <prosody rate>, breaks): over
        # max_output_s is a 413 here, before anything is queued or rendered.
        price = self._speech.estimate(req)
        payload = request_payload(req)
        payload[ESTIMATE_FIELD] = {"units": price.units, "output_s": round(price.output_s, 1)}
        return self._enqueue(req.owner, payload, idempotency_key, self._voice_ids(req))

    def submit_dialogue(
        self, dialogue: Dialogue, dialogues: Dialogues, *, idempotency_key: str | None = None
    ) -> tuple[JobRecord, bool]:
        """Check and price ``dialogue`` now (4xx naming the turn, 413 over
        max_output_s: service/dialogue.py) and queue it as a speech job whose
        payload holds its turns; return (job, created)."""
        if dialogue.owner is None:
            raise ValueError("a speech job needs an owner")
        return self.enqueue_dialogue(
            dialogues.prepare(dialogue), dialogues, idempotency_key=idempotency_key
        )

    def enqueue_dialogue(
        self,
        prepared: PreparedDialogue,
        dialogues: Dialogues,
        *,
        idempotency_key: str | None = None,
        purge_with: str | None = None,
        record_words: bool = False,
    ) -> tuple[JobRecord, bool]:
        """Queue a dialogue already checked and priced (an audiobook prices all
        its chapters before it queues any: service/audiobooks.py).
        ``purge_with``: a blob prefix (ending in /) of files made from this
        job's audio, purged with it if its voice is deleted. ``record_words``:
        the job keeps its words' timings (result ``words_key``)."""
        dialogue = prepared.dialogue
        if dialogue.owner is None:
            raise ValueError("a speech job needs an owner")
        payload = dialogue.to_payload()
        if purge_with is not None:
            if not purge_with.endswith("/") or purge_with.count("/") < 2:
                raise ValueError("purge_with is a blob folder like 'audiobooks/<id>/'")
            payload[PURGE_WITH_FIELD] = purge_with
        if record_words:
            payload[WORDS_FIELD] = True
        payload[ESTIMATE_FIELD] = {
            "units": sum(t.service.text_size(t.request) for t in prepared.turns),
            "output_s": round(prepared.output_s, 1),
        }
        return self._enqueue(
            dialogue.owner, payload, idempotency_key, dialogues.voice_ids(prepared)
        )

    def _enqueue(
        self,
        owner: str,
        payload: dict[str, Any],
        idempotency_key: str | None,
        voice_ids: Sequence[str],
    ) -> tuple[JobRecord, bool]:
        """Queue a speech job and announce it (a repeat of an idempotent
        submit returns the first job and announces nothing)."""
        job, created = self._queue.enqueue(
            kind=SPEECH_JOB_KIND,
            owner=owner,
            payload=payload,
            max_attempts=self.config.max_attempts,
            idempotency_key=idempotency_key,
            voice_ids=voice_ids,
        )
        if created:
            self._events.publish(job)
        return job, created

    def delete(self, job_id: str, owner: str | None) -> JobRecord:
        """Delete a job and its audio. A worker still rendering it loses its
        lease and stops; audio it stores after this is removed by it."""
        job = self._queue.delete(job_id, owner)
        if job.kind == SPEECH_JOB_KIND and job.payload is not None:
            self._purge(job)
        return job

    def _purge(self, job: JobRecord) -> None:
        """The job's audio and the files made from it (PURGE_WITH_FIELD): an
        audiobook's M4B does not outlive a chapter deleted, expired or revoked."""
        self._blobs.delete_prefix(blob_key(job))
        derived = (job.payload or {}).get(PURGE_WITH_FIELD)
        if isinstance(derived, str) and derived.endswith("/") and derived.count("/") > 1:
            self._blobs.delete_prefix(derived)

    def serves(self, key: str) -> bool:
        """Whether ``key`` is still a succeeded job's audio made with voices that
        all still exist: a signed link's last check before it hands out bytes
        (a deleted or revoked job, or one whose voice was deleted through a
        path that has not revoked it yet, serves nothing)."""
        return self.served_job(key) is not None

    def served_job(self, key: str) -> JobRecord | None:
        """The job whose audio ``key`` still is (:meth:`serves`), else None."""
        job_id = key.removeprefix(JOB_BLOB_PREFIX).rsplit(".", 1)[0]
        try:
            job = self._queue.get(job_id, None)
        except NotFound:
            return None
        if job.state != "succeeded" or (job.result or {}).get("blob_key") != key:
            return None
        return None if self._queue.missing_voices(job.id) else job

    def _catalog_voice_ids(self, req: SpeechRequest) -> Sequence[str]:
        # The catalog is looked up only when the request names a voice.
        return spoken_voice_ids(lambda v, owner: self._speech.catalog.resolve(v, owner), req)

    def revoke_voices(self, voice_ids: Collection[str] | None) -> int:
        """Revoke the jobs that speak with ``voice_ids`` (None: with any voice
        that no longer exists) and delete their audio; return how many jobs
        had audio purged. Part of deleting a voice; also run by the worker's
        sweep, which catches deletes that did not get here (a crash between,
        the command line) and purges a blob store that was unreachable."""
        return len(self._revoke(voice_ids)[1])

    def revoke_voice_jobs(self, voice_ids: Collection[str]) -> list[str]:
        """:meth:`revoke_voices` for a deletion: the ids of the jobs revoked
        (their audio purged or owed a purge), which its receipt lists."""
        return self._revoke(voice_ids)[0]

    def _revoke(self, voice_ids: Collection[str] | None) -> tuple[list[str], list[str]]:
        """(jobs revoked, jobs whose audio was purged now)."""
        revoked = self._queue.revoke_for_voices(
            voice_ids, kinds=(SPEECH_JOB_KIND,), error=VOICE_DELETED_ERROR
        )
        purged: list[str] = []
        for job_id in revoked:
            try:
                job = self._queue.get(job_id, None)
            except NotFound:
                continue  # deleted meanwhile, audio with it
            self._publish(job)
            try:
                self._purge(job)
            except Exception as exc:  # unreachable store: the purge stays owed
                log.warning("audio purge of a revoked job postponed: %s", type(exc).__name__)
                continue
            self._queue.audio_purged(job_id)
            purged.append(job_id)
        return list(revoked), purged

    def sweep_expired(self, *, now: datetime | None = None) -> int:
        """Delete ended speech jobs older than the retention, with their audio,
        then the audiobooks left without chapters (service/audiobook_expiry.py);
        how many jobs and books."""
        cutoff = retention_cutoff(self.config.retention_s, now)
        if cutoff is None:
            return 0
        removed = 0
        for job in self._queue.finished_before(cutoff, kinds=(SPEECH_JOB_KIND,)):
            try:
                self.delete(job.id, None)
                removed += 1
            except VoxcloneError:
                pass  # another replica swept it first
        return removed + expire_books(self._queue, self._blobs, cutoff)

    # -- worker side ------------------------------------------------------------
    def stop(self) -> None:
        """Ask the job being rendered to stop and go back to the queue."""
        self._stopping.set()

    def resume(self) -> None:
        self._stopping.clear()

    def run_one(self) -> JobRecord | None:
        """Claim and run one job; return its final record (None: nothing to do).

        Safe to call from several threads (JobWorker slots): a claim never
        takes a job of an owner this process is already running a job for."""
        if self._stopping.is_set():
            return None
        with self._claiming:
            job = self._queue.claim(
                self.worker_id,
                kinds=(SPEECH_JOB_KIND,),
                lease_s=self.config.lease_s,
                exclude_owners=set(self._running),
            )
            if job is None:
                return None
            self._running[job.owner] += 1
        try:
            self._events.publish(job)
            return self._run(job)
        finally:
            with self._claiming:
                self._running[job.owner] -= 1
                if self._running[job.owner] <= 0:
                    del self._running[job.owner]

    def _run(self, job: JobRecord) -> JobRecord | None:
        lost = threading.Event()
        cancel = threading.Event()
        done = threading.Event()
        heartbeat = threading.Thread(
            target=self._heartbeat,
            args=(job.id, lost, cancel, done),
            name=f"voxclone-lease-{job.id}",
            daemon=True,
        )
        heartbeat.start()
        try:
            return self._render(job, lost, cancel)
        finally:
            done.set()
            heartbeat.join(timeout=5)

    def _heartbeat(
        self, job_id: str, lost: threading.Event, cancel: threading.Event, done: threading.Event
    ) -> None:
        # Renew well before the lease runs out; the same beat notices a cancel
        # asked through any replica (the flag is in the database).
        interval = max(0.05, min(self.config.lease_s / 3.0, 2.0))
        while not done.wait(interval):
            try:
                if not self._queue.renew(job_id, self.worker_id, self.config.lease_s):
                    lost.set()
                    return
                if self._queue.is_cancel_requested(job_id):
                    cancel.set()
            except VoxcloneError:
                lost.set()  # the job was deleted
                return
            except Exception:
                # The database is briefly unreachable: keep rendering; if the
                # lease expires meanwhile, renew() says so on a later beat.
                log.warning("could not renew a job lease", exc_info=True)

    def _render(
        self, job: JobRecord, lost: threading.Event, cancel: threading.Event
    ) -> JobRecord | None:
        # The audio goes to disk as it is made, then to the blob store in
        # parts: a job of hours is never one file in memory.
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES) as spool:
            return self._render_into(job, spool, lost, cancel)

    def _estimated_s(self, job: JobRecord, req: SpeechRequest) -> float:
        """The audio length ``job`` was queued with (priced now for a job
        queued before estimates were stored)."""
        stored = (job.payload or {}).get(ESTIMATE_FIELD)
        if isinstance(stored, dict) and isinstance(stored.get("output_s"), int | float):
            return float(stored["output_s"])
        return self._speech.estimate(req).output_s

    def _render_into(
        self,
        job: JobRecord,
        spool: IO[bytes],
        lost: threading.Event,
        cancel: threading.Event,
    ) -> JobRecord | None:
        assert job.payload is not None
        # A dialogue's payload holds turns (service/dialogue.py), a text's a text.
        dialogue = is_dialogue(job.payload)
        req = None if dialogue else request_of(job.payload, job.owner)
        total = 1
        done_chars = 0
        # A dialogue job queued with record_words: its words and its turns
        # spoken without them (service/job_words.py).
        words: list[SpeakerWord] | None = [] if dialogue and job.payload.get(WORDS_FIELD) else None
        untimed: list[int] = []
        chunks = 0
        last_write = 0.0

        def progress(chars: int) -> None:
            nonlocal done_chars, chunks, last_write
            done_chars += chars
            chunks += 1
            now = time.monotonic()
            if now - last_write < 0.5:
                return  # one progress write per half second is plenty
            last_write = now
            percent = min(99.0, 100.0 * done_chars / total)
            message = f"{chunks} chunks done, {min(done_chars, total)} of {total} characters"
            try:
                self._publish(
                    self._queue.update_claimed(
                        job.id, self.worker_id, progress=percent, message=message
                    )
                )
            except LeaseLost:
                lost.set()

        def cancelled() -> bool:
            return lost.is_set() or cancel.is_set() or self._stopping.is_set()

        def set_total(chars: int) -> None:
            nonlocal total
            total = max(1, chars)

        try:
            if req is None:
                ctype = self._render_dialogue(
                    job, spool, progress, cancelled, set_total, words, untimed
                )
            else:
                # Inside the try: the voice may have been deleted since the job was
                # queued, which ends the job like any other request error.
                total = max(1, self._speech.text_size(req))
                # Names resolve again here: a voice renamed or replaced since the
                # job was queued is linked too, so deleting it revokes the job.
                self._queue.link_voices(job.id, self._voice_ids(req))
                # Held to the estimate it was queued with: a job whose text now
                # speaks far longer (its lexicon changed) stops with a clear failure.
                limit_s = allowance(self._estimated_s(job, req), self.config.outgrow_floor_s)
                # Counted in the backlog only by what it keeps queued: a long job must
                # not make every live request look late (and refused) while it runs.
                admission = self._speech.admit_background(req)
                with released_at_end(admission):
                    ctype = self._speech.synthesize_into(
                        req,
                        spool,
                        admission=admission,
                        max_output_s=limit_s,
                        progress=progress,
                        cancelled=cancelled,
                    )
        except Cancelled:
            return self._stopped(job, lost, cancel)
        except VoxcloneError as exc:
            if cancelled():
                return self._stopped(job, lost, cancel)
            if exc.status < 500:
                # The request itself is wrong (its voice was deleted since, ...):
                # another try would fail the same way. A render that finds its
                # voice gone has raced the voice's delete, whose revocation may
                # come a moment later and leaves a failed job as it is: the job
                # says voice_deleted either way (it said not_found in a full
                # run of tests/ on 2026-12-07, test_speech_jobs_voice_delete).
                error = (
                    VOICE_DELETED_ERROR
                    if self._queue.missing_voices(job.id)
                    else exc.to_body()["error"]
                )
                return self._end(job, state="failed", message=error["message"], error=error)
            return self._retry_or_fail(job, exc.to_body()["error"])
        except Exception as exc:  # a job must always end in a known state
            if cancelled():
                return self._stopped(job, lost, cancel)
            log.exception("speech job attempt failed", extra={"job_id": job.id})
            return self._retry_or_fail(
                job, {"code": "render_failed", "message": f"{type(exc).__name__}: {exc}"[:500]}
            )
        if cancelled():
            return self._stopped(job, lost, cancel)
        key = blob_key(job)
        size = spool.tell()
        spool.seek(0)
        self._blobs.put_file(key, spool, content_type=ctype)
        timed: dict[str, Any] = {}
        if words is not None:
            # Stored before the job says succeeded: a succeeded job's words
            # are there; its key starts with the audio's, so they go with it.
            timed = {"words_key": words_key(key), "word_count": len(words)}
            self._blobs.put(
                timed["words_key"], dump_words(words, untimed), content_type=WORDS_CONTENT_TYPE
            )
        # Store, then check (the cache tiers' write-then-verify argument): a
        # delete that revoked the job before this point makes _end fail with
        # LeaseLost; one after it revokes the finished job and deletes the
        # audio itself; one whose revocation never ran (another path, a crash)
        # is caught by the missing-voice check below.
        final = self._end(
            job,
            state="succeeded",
            message=f"done: {chunks} chunks",
            error=None,
            result={
                "blob_key": key,
                "content_type": ctype,
                "format": file_extension(job.payload.get("format", "wav")),
                "bytes": size,
                "attempts": job.attempts,
                **timed,
            },
        )
        if final is None:
            if not self._someone_keeps(job.id, key):
                # Deleted, cancelled or revoked while the audio was stored:
                # leave no orphan.
                self._blobs.delete_prefix(key)
            return None
        missing = self._queue.missing_voices(job.id)
        if missing:
            self.revoke_voices(missing)
            try:
                return self._queue.get(job.id, None)
            except NotFound:
                return None
        return final

    def _render_dialogue(
        self,
        job: JobRecord,
        spool: IO[bytes],
        progress: Callable[[int], None],
        cancelled: Callable[[], bool],
        set_total: Callable[[int], None],
        words: list[SpeakerWord] | None = None,
        untimed: list[int] | None = None,
    ) -> str:
        """A dialogue job's render into ``spool`` (its characters to
        ``set_total`` first, for progress; its words into ``words`` when
        given); its content type."""
        assert job.payload is not None
        # Checked against the limits when it was queued; resolved again here
        # (a voice deleted since fails the job, one replaced is linked).
        dialogues = Dialogues(self._speech, max_output_s=math.inf, max_text_chars=sys.maxsize)
        prepared = dialogues.prepare(Dialogue.of_payload(job.payload, job.owner))
        set_total(dialogues.text_size(prepared))
        self._queue.link_voices(job.id, dialogues.voice_ids(prepared))
        estimate = (job.payload.get(ESTIMATE_FIELD) or {}).get("output_s", prepared.output_s)
        ctype = dialogues.render_into(
            prepared,
            spool,
            max_output_s=allowance(float(estimate), self.config.outgrow_floor_s),
            progress=progress,
            cancelled=cancelled,
            words=words,
            untimed=untimed if words is not None else None,
        )
        return ctype

    def _someone_keeps(self, job_id: str, key: str) -> bool:
        """Whether the audio under ``key`` is another worker's to keep: the
        job was taken over (its lease expired) and is running again or was
        finished by the new holder, which writes the same key."""
        try:
            job = self._queue.get(job_id, None)
        except NotFound:
            return False
        return job.state == "running" or (job.result or {}).get("blob_key") == key

    def _stopped(
        self, job: JobRecord, lost: threading.Event, cancel: threading.Event
    ) -> JobRecord | None:
        if lost.is_set():
            return None  # someone else owns (or deleted) the job now
        if cancel.is_set():
            return self._end(job, state="cancelled", message="cancelled")
        # This process is shutting down: hand the job back without spending a try.
        try:
            released = self._queue.release(job.id, self.worker_id)
        except LeaseLost:
            return None
        self._publish(released)
        return released

    def _retry_or_fail(self, job: JobRecord, error: dict[str, Any]) -> JobRecord | None:
        if job.attempts >= job.max_attempts:
            message = f"failed after {job.attempts} attempts: {error.get('message', '')}"
            return self._end(job, state="failed", message=message[:500], error=error)
        delay = min(self.config.retry_max_s, self.config.retry_base_s * 2 ** (job.attempts - 1))
        delay *= random.uniform(0.8, 1.2)  # replicas failing together retry apart
        try:
            queued = self._queue.retry_later(job.id, self.worker_id, delay_s=delay, error=error)
        except LeaseLost:
            return None
        self._publish(queued)
        return queued

    def _end(self, job: JobRecord, **fields: Any) -> JobRecord | None:
        try:
            final = self._queue.update_claimed(job.id, self.worker_id, **fields)
        except LeaseLost:
            return None
        self._publish(final)
        return final

    def _publish(self, job: JobRecord) -> None:
        self._events.publish(job)


class JobWorker:
    """``slots`` threads per process polling the queue (with jitter, so replicas
    that started together do not poll in step); the first also sweeps expired
    jobs and revokes jobs of deleted voices.

    Each slot runs one job at a time, and no two slots run jobs of one owner
    (SpeechJobs.run_one): with the default two slots a tenant's short job
    starts while another tenant's long one renders, instead of after it.
    """

    SWEEP_EVERY_S = 60.0

    def __init__(
        self,
        jobs: SpeechJobs,
        *,
        poll_s: float = 1.0,
        slots: int = 2,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError("a job worker needs at least one slot")
        self._jobs = jobs
        self._poll_s = poll_s
        self._slots = slots
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._on_error = on_error

    @property
    def running(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def start(self) -> None:
        if self.running:
            return
        self._stop.clear()
        self._jobs.resume()
        self._threads = [
            threading.Thread(
                target=self._loop, args=(slot == 0,), name=f"voxclone-jobs-{slot}", daemon=True
            )
            for slot in range(self._slots)
        ]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._jobs.stop()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self._threads = []

    def _loop(self, sweeps: bool) -> None:
        next_sweep = 0.0
        while not self._stop.is_set():
            ran = None
            try:
                if sweeps and time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + self.SWEEP_EVERY_S
                    self._jobs.sweep_expired()
                    self._jobs.revoke_voices(None)
                ran = self._jobs.run_one()
            except Exception as exc:  # the loop must outlive a bad database moment
                log.warning("job worker iteration failed", exc_info=True)
                if self._on_error is not None:
                    self._on_error(exc)
            if ran is None:
                self._stop.wait(self._poll_s * random.uniform(0.5, 1.5))
