"""FakeVoiceService: an in-memory stand-in for the real VoiceService, for route tests only.

It implements exactly the interface the routes call, keeps voices and jobs
per owner (another owner's id behaves as missing) and publishes job updates
on a real JobEvents so the SSE route can be exercised.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import numpy as np

from voxclone.errors import AudioQualityError, NotFound
from voxclone.runtime.job_store import JobEvents, JobRecord
from voxclone.runtime.voice_store import ConsentRecord, VoiceRecord, VoiceSummary
from voxclone.service.voices.request import DeletedVoice


class FakeVoiceService:
    def __init__(self, catalog: Any, events: JobEvents) -> None:
        self._catalog = catalog
        self.events = events
        self.voices: dict[str, VoiceRecord] = {}
        self.jobs: dict[str, JobRecord] = {}
        self.enrolled: list[Any] = []
        self.refine_methods: list[str | None] = []
        self.inline_consents: list[tuple[str, Any]] = []
        self._ids = itertools.count(1)

    def enroll(self, req: Any) -> tuple[VoiceRecord, JobRecord | None]:
        if len(req.audio) < 10:
            raise AudioQualityError("reference audio is too short", field="audio")
        self.enrolled.append(req)
        n = next(self._ids)
        voice = VoiceRecord(
            id=f"v_fake{n}",
            name=req.name,
            language=req.language,
            owner=req.owner,
            created_at="2025-01-01T00:00:00Z",
            updated_at="2025-01-01T00:00:00Z",
            version=1,
            consent=ConsentRecord("0" * 64, req.consent.given_by, "2025-01-01T00:00:00Z"),
            embedding=np.zeros(256, np.float32),
            style=np.zeros((510, 1, 256), np.float32),
            quality={"similarity": 0.5},
            source="instant",
            reference_audio=req.audio if req.keep_reference else None,
        )
        self.voices[voice.id] = voice
        job = self._new_job(voice) if req.refine else None
        return voice, job

    def admit_enrollment(self, *, wait: bool = True, **_terms: Any) -> Any:
        from voxclone.service.voices.admission import EnrollmentQueue

        # No audio work here: a place that never queues.
        return EnrollmentQueue().admit(renders=False)

    def start_enrollment(self, req: Any, *, wait: bool = True, **_admission: Any) -> Any:
        from voxclone.service.voices.request import Enrollment

        self.waited = wait
        voice, job = self.enroll(req)
        report = None if wait else self._new_job(voice, kind="report")
        return Enrollment(voice, report, job)

    def add_recordings(self, voice_id: str, owner: str, audio: list[bytes]) -> VoiceRecord:
        voice = self.get(voice_id, owner)
        if any(len(clip) < 10 for clip in audio):
            raise AudioQualityError("reference audio is too short", field="audio")
        clips = int(voice.quality.get("clips", 1)) + len(audio)
        quality = {**voice.quality, "clips": clips}
        updated = replace(voice, version=voice.version + 1, quality=quality)
        self.voices[voice_id] = updated
        return updated

    def _new_job(self, voice: VoiceRecord, kind: str = "refine") -> JobRecord:
        job = JobRecord(
            id=f"j_fake{next(self._ids)}",
            kind=kind,
            voice_id=voice.id,
            owner=voice.owner,
            state="queued",
            progress=0.0,
            message="queued",
            created_at="2025-01-01T00:00:00Z",
            updated_at="2025-01-01T00:00:00Z",
        )
        self.jobs[job.id] = job
        return job

    def advance(self, job_id: str, **changes: Any) -> JobRecord:
        job = replace(self.jobs[job_id], **changes)
        self.jobs[job_id] = job
        self.events.publish(job)
        return job

    def inline_voice(self, audio: bytes, owner: str, consent: Any, model: str | None = None) -> Any:
        self.inline_consents.append((owner, consent))
        if len(audio) < 10:
            raise AudioQualityError("reference audio is too short", field="reference")
        return self._catalog.resolve("clear_male", None)

    def get(self, voice_id: str, owner: str) -> VoiceRecord:
        voice = self.voices.get(voice_id)
        if voice is None or voice.owner != owner:
            raise NotFound("voice not found", field="voice_id")
        return voice

    def list(self, owner: str) -> list[VoiceSummary]:
        return [
            VoiceSummary(
                v.id,
                v.name,
                v.language,
                v.owner,
                v.created_at,
                v.updated_at,
                v.version,
                v.source,
                v.quality,
                v.reference_audio is not None,
            )
            for v in self.voices.values()
            if v.owner == owner
        ]

    def rename(self, voice_id: str, owner: str, name: str) -> VoiceRecord:
        voice = replace(self.get(voice_id, owner), name=name)
        self.voices[voice_id] = voice
        return voice

    def delete(self, voice_id: str, owner: str) -> DeletedVoice:
        # What VoiceService.delete returns: the route builds a receipt from it.
        voice = self.get(voice_id, owner)
        del self.voices[voice_id]
        return DeletedVoice(record=voice, purge_pending=False, deleted_at="2026-12-06T00:00:00Z")

    def start_refine(
        self, voice_id: str, owner: str, budget_s: float | None = None, method: str | None = None
    ) -> JobRecord:
        self.refine_methods.append(method)
        return self._new_job(self.get(voice_id, owner))

    # The fake has no differentiable engine.
    deep_refine_missing = "the fake voice service has no deep refine"

    def get_job(self, job_id: str, owner: str) -> JobRecord:
        job = self.jobs.get(job_id)
        if job is None or job.owner != owner:
            raise NotFound("job not found", field="job_id")
        return job

    def cancel_job(self, job_id: str, owner: str) -> JobRecord:
        self.get_job(job_id, owner)
        return self.advance(job_id, state="cancelled", message="cancelled")


class FakeJobView:
    """The fake's jobs as the job routes read them (``runtime.jobs``)."""

    def __init__(self, service: FakeVoiceService) -> None:
        self._service = service

    def get(self, job_id: str, owner: str | None) -> JobRecord:
        job = self._service.jobs.get(job_id)
        if job is None or (owner is not None and job.owner != owner):
            raise NotFound("job not found", field="job_id")
        return job

    def request_cancel(self, job_id: str, owner: str | None) -> JobRecord:
        job = self.get(job_id, owner)
        return self._service.cancel_job(job_id, job.owner)
