"""What the report jobs of ``wait=False`` enrollments do in the voice service:
measure the stored draft and store the result as its next version, start the
refinement queued behind it, settle a voice whose measurement never came, and
find at start-up the voices still waiting for one. The durable queue that
claims and retries these jobs is service/voices/report_queue.py."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from voxclone.errors import Cancelled, InvalidInput, NotFound, VoiceChanged, VoxcloneError
from voxclone.runtime.job_store import JobEvents, JobQueue, JobRecord
from voxclone.runtime.voice_store import VoiceRecord, VoiceStore
from voxclone.service.jobs import default_worker_id
from voxclone.service.voices.jobs import VoiceJobs
from voxclone.service.voices.refine import Refinements
from voxclone.service.voices.report_queue import (
    RESUMED_NOTE,
    ReportInputs,
    ReportLease,
    ReportQueue,
    ReportTask,
    settled_before,
    stand_in_reference,
    stranded_voices,
    task_of,
)
from voxclone.service.voices.stored import (
    ListenerPrints,
    clone_quality,
    stored_print,
    with_listener_prints,
)
from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.voice.pipeline import ClonedVoice, CloningPipeline
from voxclone.synth.voice.quality_report import QualityReporter


def first_result(voice_id: str, pipeline: CloningPipeline, cloned: ClonedVoice) -> dict[str, Any]:
    """The report job's result while it still runs (``partial``): the voice
    speaks as itself (``speaks_as`` None: since issue 47 no clone speaks as a
    plain built-in), the built-in it started from when the stock check's
    winner was moved toward the reference, and its similarity as heard, the
    report's own figure (the stock check's one comparison, issue 40; without
    one, the same encoder on the same toned probe)."""
    comparison, moved = cloned.comparison, cloned.moved
    similarity: float | None = None
    if moved is not None:
        similarity = moved.similarity
    elif comparison is not None:
        similarity = comparison.clone_similarity
    elif cloned.voice.probe is not None:
        similarity = pipeline.heard_similarity(cloned.print, cloned.voice.probe, cloned.tone)
    return {
        "voice_id": voice_id,
        "partial": True,
        "speaks_as": None,
        "started_from_builtin": None if moved is None else moved.started_from,
        "similarity": None if similarity is None else round(float(similarity), 4),
    }


class ReportJobs:
    def __init__(
        self,
        *,
        store: VoiceStore,
        jobs: JobQueue,
        events: JobEvents,
        voice_jobs: VoiceJobs,
        refinements: Refinements,
        pipeline: CloningPipeline,
        reporter: QualityReporter | None,
        reference_loader: Callable[[bytes], ReferenceAudio],
        on_voice_changed: Callable[[str], None],
        closing: threading.Event,
        listener_prints: ListenerPrints | None = None,
    ) -> None:
        """``closing`` is the owning service's shutdown flag; ``start`` once
        the service is built (the queue's thread calls back into it)."""
        self._store = store
        self._jobs = jobs
        self._voice_jobs = voice_jobs
        self._refinements = refinements
        self._pipeline = pipeline
        self._reporter = reporter
        self._load_reference = reference_loader
        self._on_voice_changed = on_voice_changed
        self._listener_prints = listener_prints
        self._queue = ReportQueue(
            jobs,
            events,
            measure=self._run,
            after=self._after,
            closing=closing,
            worker_id=default_worker_id(),
            on_start=self._resume_stranded,
        )

    def start(self) -> None:
        self._queue.start()

    def close(self) -> None:
        self._queue.close()

    def submit(
        self,
        record: VoiceRecord,
        inputs: ReportInputs,
        *,
        match_tone: bool,
        keep_clone: bool,
        refine_job_id: str | None,
    ) -> JobRecord:
        """Queue the measurement of ``record``, a draft just stored."""
        return self._queue.submit(
            record.id,
            record.owner,
            record.version,
            inputs,
            match_tone=match_tone,
            keep_clone=keep_clone,
            refine_job_id=refine_job_id,
        )

    def _run(self, task: ReportTask, lease: ReportLease) -> VoiceRecord:
        """Measure a ``wait=False`` enrollment's voice and store the result as
        its next version; raises when it did not (the queue ends or retries it)."""
        if self._voice_jobs.should_stop(task.job.id, task.voice_id):
            raise Cancelled("cancelled")
        record = self._store.get(task.voice_id, task.owner, include_reference_audio=False)
        if record.version != task.version or record.quality.get("report_pending") is not True:
            return self._outdated(lease, record)
        lease.update(progress=0.0, message="calibrating pitch and tone")
        if task.inputs is not None:
            references, draft = task.inputs.references, task.inputs.draft
        else:
            references, draft = self._stored_inputs(record)
        cloned = self._pipeline.finish(
            draft,
            match_tone=task.match_tone,
            allow_stock=not task.keep_clone,
            language=record.language,
        )
        # The first figures, as soon as they are known (issue 46: the web UI
        # showed "measuring…" until the end): the spoken voice and its
        # similarity come with the stock check; Whisper's word error rate and
        # the several-speakers check are the rest of the report (measured on
        # the 2-core dev host, loaded: here at 145 s of a 153 s report job).
        lease.update(
            progress=90.0,
            message="measuring the word error rate",
            result=first_result(record.id, self._pipeline, cloned),
        )
        quality = with_listener_prints(
            clone_quality(self._reporter, self._pipeline, references, cloned),
            self._listener_prints,
            references,
            earlier=record.quality,
        )
        if task.keep_clone:
            quality["keep_clone"] = True
        if task.inputs is None and len(references[0].samples16k) == 0:
            quality["report_resumed"] = RESUMED_NOTE
        if self._voice_jobs.should_stop(task.job.id, task.voice_id):
            raise Cancelled("cancelled")
        try:
            # Written only over the version it measured: checking first and
            # writing after let a recording added in between be overwritten.
            stored = self._store.update_style(
                record.id,
                record.owner,
                style=cloned.voice.style.astype(np.float32),
                quality=quality,
                source="instant",
                tone_db=None if cloned.tone is None else cloned.tone.gain_db,
                if_version=record.version,
            )
        except VoiceChanged:
            # A recording was added (a full clone of its own) or a refinement
            # landed meanwhile: this measurement is of a voice that is gone.
            current = self._store.get(record.id, record.owner, include_reference_audio=False)
            return self._outdated(lease, current)
        self._on_voice_changed(record.id)
        lease.finish(
            state="succeeded",
            progress=100.0,
            message="measured",
            result={
                "voice_id": record.id,
                "version": stored.version,
                "similarity": quality.get("similarity"),
                "wer": quality.get("wer"),
                "speaks_as": quality.get("replaced_by_stock_voice"),
                "started_from_builtin": quality.get("started_from_builtin"),
                "warnings": quality.get("warnings", []),
            },
        )
        return stored

    @staticmethod
    def _outdated(lease: ReportLease, current: VoiceRecord) -> VoiceRecord:
        lease.finish(
            state="succeeded",
            message="the voice changed meanwhile; its newer version stands",
            result={"voice_id": current.id, "version": current.version},
        )
        return current

    def _stored_inputs(self, record: VoiceRecord) -> tuple[Sequence[ReferenceAudio], ClonedVoice]:
        """What a report needs when the enrolling process is gone: the draft
        again from the stored print, and the recording itself where it was kept
        (one clip), else its stored summary (report_queue.stand_in_reference)."""
        voice_print = stored_print(record)
        if voice_print is None:
            raise InvalidInput("this voice has no stored print to measure", field="voice_id")
        draft = self._pipeline.draft(voice_print)
        if record.quality.get("clips", 1) == 1:
            kept = self._store.get(record.id, record.owner, include_reference_audio=True)
            if kept.reference_audio:
                with contextlib.suppress(VoxcloneError):  # refused now: use the summary
                    return [self._load_reference(kept.reference_audio)], draft
        return [stand_in_reference(record.quality, voice_print)], draft

    def _after(self, task: ReportTask, measured: VoiceRecord | None, failure: str | None) -> None:
        """After a report job ended: start the refinement asked for, or, when
        no measurement came, settle the voice (or forget the job of a deleted one)."""
        gone = measured is None and not self._settle_unmeasured(task, failure or "no report")
        if gone:
            with contextlib.suppress(NotFound):  # the voice is gone: its job goes too
                self._jobs.delete(task.job.id, None)
        if task.refine_job_id is not None:
            self._refinements.after_report(task.refine_job_id, measured)

    def _settle_unmeasured(self, task: ReportTask, why: str) -> bool:
        """The draft stays the voice, no longer ``report_pending`` (False: the
        voice is gone). Nothing happens to a voice that changed meanwhile."""
        try:
            record = self._store.get(task.voice_id, task.owner, include_reference_audio=False)
        except NotFound:
            return False
        if record.quality.get("report_pending") is not True or record.style is None:
            return True
        quality = {k: v for k, v in record.quality.items() if k != "report_pending"}
        quality["report_error"] = why
        with contextlib.suppress(VoiceChanged):
            self._store.update_style(
                record.id,
                record.owner,
                style=record.style,
                quality=quality,
                source=record.source,
                if_version=record.version,
            )
            self._on_voice_changed(record.id)
        return True

    def _resume_stranded(self) -> None:
        """At start: a voice still waiting for a report that no job will make
        gets a report job now, or is settled when its last one failed for good
        (a report that crashed every worker must not be tried at every start)."""
        for voice, last in stranded_voices(
            self._store, self._jobs, settled_before=settled_before()
        ):
            if last is not None and last.payload is not None and last.state != "succeeded":
                self._settle_unmeasured(task_of(last, None), last.message or "the report failed")
                continue
            self._queue.submit(
                voice.id,
                voice.owner,
                voice.version,
                None,
                keep_clone=bool(voice.quality.get("keep_clone", False)),
            )
