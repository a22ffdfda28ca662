"""Voice library use cases: enroll (instant clone + quality report), refine in
the background, rename, delete with everything derived from it, inline clones.

Enrollment follows the engine's ``clone_method``: ``"style"`` engines get an
atlas clone in their style space (instant clone, refinement, tone match);
``"prompt"`` engines get the engine's own conditioning prompt computed from
the same cleaned reference. Consent, the quality report and deletion are the
same for both.

Privacy (DESIGN.md §1.5): consent is required and recorded as a hash of the
statement; raw reference audio is stored only when the user asks; deleting a
voice deletes its rows and jobs and tells the audio caches to drop what was
made with it (``on_voice_changed``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from voxclone.errors import (
    Cancelled,
    InvalidInput,
    NotFound,
    UnknownModel,
    VoiceChanged,
    VoxcloneError,
)
from voxclone.runtime.inline_log import InlineVoiceLog
from voxclone.runtime.job_store import JobEvents, JobRecord, JobStore, SqlJobStore
from voxclone.runtime.voice_store import (
    LEGACY_ENGINE,
    LEGACY_MODEL_ID,
    ConsentRecord,
    VoiceRecord,
    VoiceStore,
    VoiceSummary,
)
from voxclone.service.catalog import ResolvedVoice
from voxclone.service.enroll_checks import check_given_by, check_name_free, voice_language
from voxclone.service.report_jobs import (
    RESUMED_NOTE,
    ReportInputs,
    ReportLease,
    ReportQueue,
    ReportTask,
    mark_pending,
    settled_before,
    stand_in_reference,
    stranded_voices,
    task_of,
)
from voxclone.service.speech_job_voices import SPEECH_JOB_KIND
from voxclone.service.speech_jobs import default_worker_id
from voxclone.service.voices_inline import INLINE_ID_PREFIX, InlineVoices
from voxclone.service.voices_request import (
    ConsentInput,
    DeletedVoice,
    Enrollment,
    EnrollRequest,
    PromptCloning,
    checked_consent,
    refuse_blend,
)
from voxclone.service.voices_stored import (
    prompt_quality,
    recipe_from_json,
    recipe_to_json,
    stored_print,
)
from voxclone.synth.audio.reference import ReferenceAudio, combine_references
from voxclone.synth.audio.warmup_clip import vowel_wav
from voxclone.synth.engine.base import EngineCapabilities
from voxclone.synth.voice.clone import (
    InstantCloner,
    RefineProgress,
    StyleRefiner,
)
from voxclone.synth.voice.pipeline import (
    STOCK_PREFERENCE,
    ClonedVoice,
    CloningPipeline,
    VoicePrint,
    pool_prints,
)
from voxclone.synth.voice.pitch_calibration import PitchCalibrator
from voxclone.synth.voice.prosody import PitchStats, pitch_stats
from voxclone.synth.voice.quality_report import QualityReporter, reference_warnings
from voxclone.synth.voice.style_space import VoiceRecipe

# Names other modules have imported from here since before the split.
__all__ = [
    "ConsentInput",
    "DeletedVoice",
    "EnrollRequest",
    "Enrollment",
    "PromptCloning",
    "VoiceService",
]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

REFINE_JOB_KIND = "refine"
MAX_REFINE_BUDGET_S = 1800.0
PROGRESS_STEP = 1.0  # percent; fewer store writes for a smooth bar
# Recordings pooled into one voice per request (each is checked on its own limits).
MAX_CLIPS = 8
# Recording additions racing each other: each retry pools into the newer version.
ADD_RECORDING_ATTEMPTS = 3

RefinerSource = StyleRefiner | Callable[[float], StyleRefiner]


class VoiceService:
    def __init__(
        self,
        *,
        store: VoiceStore,
        jobs: JobStore,
        job_events: JobEvents,
        cloner: InstantCloner | None,
        refiner_factory_or_refiner: RefinerSource | None,
        reference_loader: Callable[[bytes], ReferenceAudio],
        on_voice_changed: Callable[[str], None],
        refine_budget_s: float = 180.0,
        quality_reporter: QualityReporter | None = None,
        pitch_calibrator: PitchCalibrator | None = None,
        follow_rate: bool = True,
        stock_check: bool = True,
        stock_preference: float = STOCK_PREFERENCE,
        refine_workers: int = 1,
        style_engine: EngineCapabilities | None = None,
        prompt_engines: Mapping[str, PromptCloning] | None = None,
        default_engine: str | None = None,
        resolve_model: Callable[[str | None], str | None] | None = None,
        inline_log: InlineVoiceLog | None = None,
        inline_ttl_s: float = 3600.0,
        clock: Callable[[], float] = time.time,
        purge: Callable[[str], bool] | None = None,
        revoke_jobs: Callable[[Sequence[str]], object] | None = None,
    ) -> None:
        """``cloner`` … ``pitch_calibrator`` are the style engine's cloning stack
        (None when no style engine is loaded); ``style_engine`` names it in the
        records. ``prompt_engines`` maps engine names to their prompt cloning.
        ``resolve_model`` turns a request's ``model`` into an engine name."""
        self._store = store
        # Purges the caches of a deleted voice; False = postponed (journaled).
        self._purge = purge
        # Revokes the speech jobs of deleted voices and deletes their audio
        # (SpeechJobs.revoke_voices, service/speech_job_voices.py).
        self._revoke_jobs = revoke_jobs
        self._jobs = jobs
        self._events = job_events
        self._cloner = cloner
        self._refiner_source = refiner_factory_or_refiner
        self._load_reference = reference_loader
        self._on_voice_changed = on_voice_changed
        self._refine_budget_s = refine_budget_s
        self._reporter = quality_reporter
        # The style engine's cloning pipeline (None when no style engine is loaded).
        self._pipeline = (
            CloningPipeline(
                cloner,
                probe=quality_reporter.probe if quality_reporter is not None else None,
                sample_rate=quality_reporter.sample_rate
                if quality_reporter is not None
                else 24_000,
                calibrator=pitch_calibrator,
                follow_rate=follow_rate,
                stock_check=stock_check,
                stock_preference=stock_preference,
            )
            if cloner is not None
            else None
        )
        self._executor = ThreadPoolExecutor(max_workers=refine_workers, thread_name_prefix="refine")
        self._closing = threading.Event()
        # The background half of ``wait=False`` enrollments, durable across
        # crashes (service/report_jobs.py); None: this process cannot measure
        # clones (no style engine) or has no durable queue, so enrollment waits.
        self._report_queue = (
            ReportQueue(
                jobs,
                job_events,
                measure=self._run_report,
                after=self._after_report,
                closing=self._closing,
                worker_id=default_worker_id(),
                on_start=self._resume_stranded_reports,
            )
            if cloner is not None and isinstance(jobs, SqlJobStore)
            else None
        )
        self._deleted_lock = threading.Lock()
        self._deleted: set[str] = set()
        self._style_caps = style_engine
        self._prompt_engines = dict(prompt_engines or {})
        style_name = style_engine.engine if style_engine is not None else None
        self._default_engine = default_engine or style_name
        self._resolve_model = resolve_model
        self._inline = InlineVoices(
            on_voice_changed=on_voice_changed,
            inline_log=inline_log,
            ttl_s=inline_ttl_s,
            clock=clock,
            closing=self._closing,
        )
        # Audio of inline voices a previous process made and never purged.
        self._inline.purge_orphaned()
        if self._report_queue is not None:
            self._report_queue.start()  # last: its thread calls back into this service

    def start_inline_sweeper(self) -> None:
        """Purge expired inline voices in the background, even when no request comes."""
        self._inline.start_sweeper()

    def warmup(self) -> None:
        """Before the first clone (call at start-up): load the speaker encoder,
        then put a synthetic clip through an upload's checks and voice print,
        so the speech detector and the libraries they import on first use are
        loaded (the first clone through a warm server took 2.0 s to answer
        against 0.1-0.3 s for the next ones without this; bench/clone_latency.py)."""
        if self._cloner is None:
            return
        self._cloner.warmup()
        try:
            reference = self._load_reference(vowel_wav())
            self._pipeline_or_fail().voice_print([reference])
        except VoxcloneError as exc:  # the clip was refused: only the warm-up is lost
            log.warning("clone warm-up clip refused: %s", exc.message)
        self._pipeline_or_fail().warm_stock_probes()

    # -- engines ------------------------------------------------------------------
    def _engine_for(self, model: str | None) -> str | None:
        """The engine a voice for ``model`` is made with (None: the style engine
        of a service wired without engine names, as in older tests)."""
        engine = self._resolve_model(model) if self._resolve_model is not None else model
        return engine or self._default_engine

    def _prompt_cloning(self, engine: str | None) -> PromptCloning | None:
        if engine is not None and engine in self._prompt_engines:
            return self._prompt_engines[engine]
        style_name = self._style_caps.engine if self._style_caps is not None else None
        if self._cloner is None or (engine is not None and style_name not in (None, engine)):
            known = sorted({*self._prompt_engines, *([style_name] if style_name else [])})
            raise UnknownModel(
                f"voices cannot be cloned for model '{str(engine)[:40]}' on this server; "
                f"use one of {', '.join(known)}",
                field="model",
                limit=known,
            )
        return None

    def _cloner_or_fail(self) -> InstantCloner:
        if self._cloner is None:
            raise UnknownModel("no style engine is loaded on this server", field="model")
        return self._cloner

    def _pipeline_or_fail(self) -> CloningPipeline:
        if self._pipeline is None:
            raise UnknownModel("no style engine is loaded on this server", field="model")
        return self._pipeline

    # -- enrollment ---------------------------------------------------------------
    def enroll(self, req: EnrollRequest) -> tuple[VoiceRecord, JobRecord | None]:
        """Clone, measure and store a voice; (record, refine job when asked)."""
        enrolled = self.start_enrollment(req, wait=True)
        return enrolled.record, enrolled.refine_job

    def start_enrollment(self, req: EnrollRequest, *, wait: bool = True) -> Enrollment:
        """Enroll a voice. ``wait=False`` stores the atlas-lookup voice at once
        (~0.3 s after the upload is read on 2 cores: it can speak right away)
        and runs the renders in a report job: pitch calibration, tone match and
        the quality report (~5 s), which then replace the style as version 2.
        A requested refinement starts after that job. Prompt engines always
        wait (their prompt is the clone; there is nothing to defer), and so
        does a service without a durable job queue."""
        consent = checked_consent(req.consent)
        prompt_engine = self._prompt_cloning(self._engine_for(req.model))
        if prompt_engine is not None and req.refine:
            raise InvalidInput(
                "refinement searches a style space; this engine clones from a prompt",
                field="refine",
            )
        req = self._checked_fields(req, prompt_engine)
        references = self._references((req.audio, *req.extra_audio))
        if prompt_engine is not None:
            reference = combine_references(references)
            return Enrollment(
                self._enroll_prompt(req, consent, reference, prompt_engine), None, None
            )
        engine, model_id, model_version = self._style_identity()
        pipeline = self._pipeline_or_fail()
        wait = wait or self._report_queue is None
        started = time.perf_counter()
        voice_print = pipeline.voice_print(references)
        cloned = pipeline.draft(
            voice_print, started=started, print_seconds=time.perf_counter() - started
        )
        if wait:
            cloned = pipeline.finish(
                cloned,
                match_tone=req.match_tone,
                allow_stock=not req.keep_clone,
                language=req.language,
            )
        quality = self._quality(references, cloned)
        if req.keep_clone:
            quality["keep_clone"] = True  # so that adding a recording keeps it too
        if not wait:
            mark_pending(quality, references)
        record = self._create(
            req,
            consent,
            embedding=cloned.print.embedding,
            style=cloned.voice.style.astype(np.float32),
            quality=quality,
            reference_spectrum=cloned.print.spectrum,
            tone_db=None if cloned.tone is None else cloned.tone.gain_db,
            engine=engine,
            model_id=model_id,
            model_version=model_version,
        )
        if wait:
            refine_job = self.start_refine(record.id, req.owner) if req.refine else None
            return Enrollment(record, None, refine_job)
        assert self._report_queue is not None
        refine_job = self._new_job(REFINE_JOB_KIND, record) if req.refine else None
        report_job = self._report_queue.submit(
            record.id,
            record.owner,
            record.version,
            ReportInputs(references, cloned),
            match_tone=req.match_tone,
            keep_clone=req.keep_clone,
            refine_job_id=None if refine_job is None else refine_job.id,
        )
        return Enrollment(record, report_job, refine_job)

    def _checked_fields(self, req: EnrollRequest, prompt: PromptCloning | None) -> EnrollRequest:
        """``req`` with its language as stored, once every field the store would
        refuse after the cloning work has been checked (service/enroll_checks.py)."""
        check_name_free(self._store, req.name, req.owner)
        check_given_by(req.consent.given_by)
        caps = prompt.capabilities if prompt is not None else self._style_caps
        if caps is None or not caps.languages:  # wired without engine names (older tests)
            return req
        return replace(req, language=voice_language(req.language, caps.languages))

    def _new_job(self, kind: str, record: VoiceRecord) -> JobRecord:
        job = self._jobs.create(kind=kind, owner=record.owner, voice_id=record.id)
        self._publish(job)
        return job

    def _style_identity(self) -> tuple[str, str, str]:
        """(engine, model id, model version) recorded with a style voice."""
        caps = self._style_caps
        if caps is None:  # wired without engine names: the store's legacy default
            return LEGACY_ENGINE, LEGACY_MODEL_ID, ""
        return caps.engine, caps.model_id, caps.model_version

    def _enroll_prompt(
        self,
        req: EnrollRequest,
        consent: ConsentRecord,
        reference: ReferenceAudio,
        cloning: PromptCloning,
    ) -> VoiceRecord:
        """The engine's conditioning from the cleaned reference, stored with the voice."""
        audio, rate = reference.samples16k, reference.sample_rate
        started = time.perf_counter()
        blob = cloning.make_prompt(audio, rate)
        clone_s = time.perf_counter() - started
        embedding = cloning.embed(audio)
        pitch = pitch_stats(audio, rate)
        probe = None
        if cloning.reporter is not None:
            probe = cloning.reporter.probe(cloning.load_prompt(blob))
        quality = prompt_quality(cloning.reporter, reference, embedding, probe, pitch)
        quality["clone_method"] = "prompt"
        quality["instant_clone_s"] = round(clone_s, 3)
        caps = cloning.capabilities
        return self._create(
            req,
            consent,
            embedding=embedding,
            style=None,
            quality=quality,
            engine=caps.engine,
            model_id=caps.model_id,
            model_version=caps.model_version,
            prompt=blob,
        )

    def _create(
        self, req: EnrollRequest, consent: ConsentRecord, *, embedding: np.ndarray, **fields: Any
    ) -> VoiceRecord:
        """Store a new instant voice for ``req`` (``fields``: what the clone made)."""
        return self._store.create(
            VoiceRecord(
                id="",
                name=req.name,
                language=req.language,
                owner=req.owner,
                created_at="",
                updated_at="",
                version=1,
                consent=consent,
                embedding=np.asarray(embedding, np.float32),
                source="instant",
                reference_audio=req.audio if req.keep_reference else None,
                **fields,
            )
        )

    def add_recordings(self, voice_id: str, owner: str, audio: list[bytes]) -> VoiceRecord:
        """Pool more recordings into a stored voice and clone it again (a new version).

        The stored print (embedding, pitch, spectrum, speech seconds) is pooled
        with the new clips', so the first recordings need not have been kept.
        A refined voice becomes an instant one again: it was refined towards
        the old print.
        """
        record = self._store.get(voice_id, owner, include_reference_audio=False)
        refuse_blend(record, "add recordings to")
        if record.style is None:
            raise InvalidInput(
                "this voice's engine clones from a prompt: enroll it again with every "
                "recording instead of adding one",
                field="audio",
            )
        references = self._references(tuple(audio))
        new_print = self._pipeline_or_fail().voice_print(references)
        for attempt in range(ADD_RECORDING_ATTEMPTS):
            try:
                updated = self._pool_into(record, owner, references, new_print)
                break
            except VoiceChanged:
                # Another recording (or a measurement or refinement) landed
                # while this one was cloned: pool into that version instead of
                # overwriting it, so no added recording is lost.
                if attempt + 1 == ADD_RECORDING_ATTEMPTS:
                    raise
                record = self._store.get(voice_id, owner, include_reference_audio=False)
        self._on_voice_changed(record.id)
        return updated

    def _pool_into(
        self,
        record: VoiceRecord,
        owner: str,
        references: Sequence[ReferenceAudio],
        new_print: VoicePrint,
    ) -> VoiceRecord:
        """Clone ``record``'s stored print pooled with ``new_print``; stored only
        over ``record``'s version."""
        stored = stored_print(record)
        pooled = new_print if stored is None else pool_prints([stored, new_print])
        keep_clone = bool(record.quality.get("keep_clone", False))
        cloned = self._pipeline_or_fail().clone_print(
            pooled,
            match_tone=record.tone_db is not None,
            allow_stock=not keep_clone,
            language=record.language,
        )
        quality = self._quality(references, cloned)
        if keep_clone:
            quality["keep_clone"] = True
        quality["recordings_added"] = int(record.quality.get("recordings_added", 0)) + len(
            references
        )
        return self._store.update_style(
            record.id,
            owner,
            style=cloned.voice.style.astype(np.float32),
            quality=quality,
            source="instant",
            embedding=cloned.print.embedding.astype(np.float32),
            tone_db=None if cloned.tone is None else cloned.tone.gain_db,
            reference_spectrum=cloned.print.spectrum,
            if_version=record.version,
        )

    def _references(self, clips: tuple[bytes, ...]) -> list[ReferenceAudio]:
        if not 1 <= len(clips) <= MAX_CLIPS:
            raise InvalidInput(
                f"send 1 to {MAX_CLIPS} recordings of the speaker",
                field="audio",
                limit=MAX_CLIPS,
                value=len(clips),
            )
        references = []
        for index, data in enumerate(clips):
            try:
                references.append(self._load_reference(data))
            except VoxcloneError as exc:
                if len(clips) > 1:  # say which recording was refused
                    exc.message = f"recording {index + 1}: {exc.message}"
                    exc.args = (exc.message,)
                raise
        return references

    def _quality(self, references: Sequence[ReferenceAudio], cloned: ClonedVoice) -> dict[str, Any]:
        """The quality report of a new clone, plus what re-cloning it later needs."""
        reference = combine_references(references)
        voice, pitch = cloned.voice, cloned.print.pitch
        if self._reporter is not None and voice.probe is not None:
            tone, rate = cloned.tone, self._reporter.sample_rate

            def as_heard(audio: np.ndarray) -> np.ndarray:
                return audio if tone is None else tone.apply(audio, rate)

            quality = self._reporter.report(
                reference,
                cloned.print.embedding,
                as_heard(voice.probe),
                reference_pitch_hz=pitch.median_hz,
                style=voice.style,
                heard=as_heard,
                # One comparison for the stock check and the report (issue 40);
                # without a heard one, the atlas's closest of the same sex.
                stock=None
                if cloned.comparison is not None
                else self._pipeline_or_fail().closest_stock(cloned.print),
                comparison=cloned.comparison,
            ).to_dict()
        else:
            quality = {
                "similarity": None,
                "wer": None,
                "warnings": reference_warnings(reference, None),
                "reference_seconds": round(reference.speech_seconds, 2),
                "reference_pitch_hz": round(pitch.median_hz, 1),
            }
        quality["style_recipe"] = recipe_to_json(voice.recipe)
        if cloned.stock_voice is not None:
            # The voice speaks as this built-in (with the reference's tone): the
            # clone was not heard closer by the stock preference. Its own key:
            # ``stock_voice`` stays the voice the report compares with.
            quality["replaced_by_stock_voice"] = cloned.stock_voice
        quality["instant_clone_s"] = round(cloned.instant_seconds, 3)
        quality["enroll_s"] = round(cloned.seconds, 3)
        quality["tone_match"] = cloned.tone is not None
        quality["clips"] = cloned.print.clips
        # The pooled print's totals, so a recording added later is weighted right.
        quality["reference_seconds"] = round(cloned.print.speech_seconds, 2)
        quality["reference_pitch"] = cloned.print.pitch_json()
        quality["reference_rate"] = round(cloned.print.rate, 3)  # a cue of the pick
        if cloned.rate > 0:
            # The speed every request with this voice is multiplied by (catalog).
            quality["speaking_rate"] = {
                "reference": round(cloned.print.rate, 3),
                "clone": round(cloned.rate, 3),
                "speed": round(cloned.speed, 4),
            }
        if voice.calibration is not None:
            quality["pitch_calibration"] = voice.calibration
        return quality

    def inline_voice(
        self, audio: bytes, owner: str, consent: ConsentInput, model: str | None = None
    ) -> ResolvedVoice:
        """Instant clone for one request; never stored, forgotten after the inline TTL.

        Cloning inline is cloning: it needs the same consent as enrollment,
        recorded in the inline log with the voice's expiry. The id depends on
        the owner (and the engine), so tenants never share an inline voice or
        its cached audio.
        """
        record = checked_consent(consent)
        engine = self._engine_for(model)
        prompt_engine = self._prompt_cloning(engine)
        self.purge_expired_inline()
        salt = owner.encode("utf-8", "replace") + b"\0"
        if prompt_engine is not None:
            salt += f"{engine}\0".encode()
        digest = hashlib.sha256(salt + audio).hexdigest()
        voice_id = INLINE_ID_PREFIX + digest[:16]
        hit = self._inline.find(voice_id)
        if hit is not None:
            return hit
        reference = self._load_reference(audio)
        if prompt_engine is not None:
            caps = prompt_engine.capabilities
            blob = prompt_engine.make_prompt(reference.samples16k, reference.sample_rate)
            voice = ResolvedVoice(
                voice_id,
                "inline reference",
                1,
                None,
                None,
                False,
                engine=caps.engine,
                model_id=caps.model_id,
                prompt=prompt_engine.load_prompt(blob),
            )
        else:
            cloned = self._pipeline_or_fail().clone([reference], match_tone=True)
            engine_name, model_id, _ = self._style_identity()
            voice = ResolvedVoice(
                voice_id,
                "inline reference",
                1,
                cloned.voice.style,
                None,
                False,
                cloned.tone,
                engine=engine_name,
                model_id=model_id,
                speed=cloned.speed,  # its pace, as a stored clone would have
            )
        self._inline.add(voice_id, voice, owner, record)
        return voice

    def inline_voices(self) -> list[str]:
        """Ids of the inline voices alive now."""
        return self._inline.ids()

    def purge_expired_inline(self, now: float | None = None) -> list[str]:
        """Forget inline voices expired at ``now`` (default: the clock's now) and
        drop every audio cached with them."""
        return self._inline.purge_expired(now)

    # -- library ------------------------------------------------------------------
    def get(self, voice_id: str, owner: str) -> VoiceRecord:
        return self._store.get(voice_id, owner, include_reference_audio=False)

    def list(self, owner: str) -> list[VoiceSummary]:
        return self._store.list(owner, limit=1000, offset=0)

    def rename(self, voice_id: str, owner: str, name: str) -> VoiceRecord:
        return self._store.rename(voice_id, owner, name)

    def delete(self, voice_id: str, owner: str) -> DeletedVoice:
        """Delete the voice now; its cached audio is purged now or, when a cache
        tier is unreachable, as soon as it is back (``purge_pending``)."""
        # Check ownership first so another owner's id behaves like a missing one.
        self._store.get(voice_id, owner, include_reference_audio=False)
        with self._deleted_lock:
            self._deleted.add(voice_id)  # running refines see this and stop
        for job in self._jobs.list(owner, limit=1000):
            # Not speech jobs: they are revoked below, so they end
            # "failed: voice_deleted" with their audio purged, not "cancelled".
            if job.voice_id == voice_id and not job.done and job.kind != SPEECH_JOB_KIND:
                self._publish(self._jobs.request_cancel(job.id, owner))
        # Saved blends made from it go in the same transaction (their style is
        # derived from this voice's recording, DESIGN.md §1.5).
        record, *derived = self._store.delete_with_derived(voice_id, owner)
        self._jobs.delete_for_voice(voice_id, keep_kinds=(SPEECH_JOB_KIND,))
        if self._revoke_jobs is not None:
            try:
                self._revoke_jobs([gone.id for gone in (record, *derived)])
            except Exception:  # the voice is gone: the job worker's sweep revokes them
                log.warning("revoking the jobs of a deleted voice postponed", exc_info=True)
        pending = False
        for gone in (record, *derived):
            if self._purge is not None:
                pending = not self._purge(gone.id) or pending
            else:
                self._on_voice_changed(gone.id)
        return DeletedVoice(record, purge_pending=pending, derived=tuple(derived))

    # -- refinement ---------------------------------------------------------------
    def start_refine(self, voice_id: str, owner: str, budget_s: float | None = None) -> JobRecord:
        budget = self._refine_budget_s if budget_s is None else float(budget_s)
        if not 1.0 <= budget <= MAX_REFINE_BUDGET_S:
            raise InvalidInput(
                f"refine budget must be between 1 and {MAX_REFINE_BUDGET_S:g} seconds",
                field="budget_s",
                limit=[1.0, MAX_REFINE_BUDGET_S],
                value=budget,
            )
        record = self._store.get(voice_id, owner, include_reference_audio=False)
        refuse_blend(record, "refine")
        if record.style is None or self._pipeline is None:
            raise InvalidInput(
                "only voices of a style engine can be refined; this voice is a "
                f"{record.engine} prompt voice",
                field="voice_id",
            )
        job = self._new_job(REFINE_JOB_KIND, record)
        self._executor.submit(self._run_refine, job.id, record, budget)
        return job

    def get_job(self, job_id: str, owner: str) -> JobRecord:
        return self._jobs.get(job_id, owner)

    def cancel_job(self, job_id: str, owner: str) -> JobRecord:
        job = self._jobs.request_cancel(job_id, owner)
        self._publish(job)
        return job

    def _refiner(self, budget_s: float) -> StyleRefiner:
        source = self._refiner_source
        if source is None:
            raise UnknownModel("no style engine is loaded on this server", field="model")
        if isinstance(source, StyleRefiner):
            return source.with_budget(budget_s)
        return source(budget_s)

    def _should_stop(self, job_id: str, voice_id: str) -> bool:
        if self._closing.is_set():
            return True
        with self._deleted_lock:
            if voice_id in self._deleted:
                return True
        try:
            return self._jobs.is_cancel_requested(job_id)
        except NotFound:
            return True

    # -- report jobs (service/report_jobs.py runs them) -------------------------------
    def _run_report(self, task: ReportTask, lease: ReportLease) -> VoiceRecord:
        """Measure a ``wait=False`` enrollment's voice and store the result as
        its next version; raises when it did not (the queue ends or retries it)."""
        if self._should_stop(task.job.id, task.voice_id):
            raise Cancelled("cancelled")
        record = self._store.get(task.voice_id, task.owner, include_reference_audio=False)
        if record.version != task.version or record.quality.get("report_pending") is not True:
            return self._report_outdated(lease, record)
        lease.update(progress=0.0, message="calibrating pitch and tone")
        if task.inputs is not None:
            references, draft = task.inputs.references, task.inputs.draft
        else:
            references, draft = self._stored_report_inputs(record)
        cloned = self._pipeline_or_fail().finish(
            draft,
            match_tone=task.match_tone,
            allow_stock=not task.keep_clone,
            language=record.language,
        )
        quality = self._quality(references, cloned)
        if task.keep_clone:
            quality["keep_clone"] = True
        if task.inputs is None and len(references[0].samples16k) == 0:
            quality["report_resumed"] = RESUMED_NOTE
        if self._should_stop(task.job.id, task.voice_id):
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
            return self._report_outdated(lease, current)
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
                "warnings": quality.get("warnings", []),
            },
        )
        return stored

    @staticmethod
    def _report_outdated(lease: ReportLease, current: VoiceRecord) -> VoiceRecord:
        lease.finish(
            state="succeeded",
            message="the voice changed meanwhile; its newer version stands",
            result={"voice_id": current.id, "version": current.version},
        )
        return current

    def _stored_report_inputs(
        self, record: VoiceRecord
    ) -> tuple[Sequence[ReferenceAudio], ClonedVoice]:
        """What a report needs when the enrolling process is gone: the draft
        again from the stored print, and the recording itself where it was kept
        (one clip), else its stored summary (report_jobs.stand_in_reference)."""
        voice_print = stored_print(record)
        if voice_print is None:
            raise InvalidInput("this voice has no stored print to measure", field="voice_id")
        draft = self._pipeline_or_fail().draft(voice_print)
        if record.quality.get("clips", 1) == 1:
            kept = self._store.get(record.id, record.owner, include_reference_audio=True)
            if kept.reference_audio:
                with contextlib.suppress(VoxcloneError):  # refused now: use the summary
                    return [self._load_reference(kept.reference_audio)], draft
        return [stand_in_reference(record.quality, voice_print)], draft

    def _after_report(
        self, task: ReportTask, measured: VoiceRecord | None, failure: str | None
    ) -> None:
        """After a report job ended: start the refinement asked for, or, when
        no measurement came, settle the voice (or forget the job of a deleted one)."""
        gone = measured is None and not self._settle_unmeasured(task, failure or "no report")
        if gone and isinstance(self._jobs, SqlJobStore):
            with contextlib.suppress(NotFound):  # the voice is gone: its job goes too
                self._jobs.delete(task.job.id, None)
        if task.refine_job_id is None:
            return
        try:
            refine = self._jobs.get(task.refine_job_id, None)
        except NotFound:
            return
        if refine.done:  # e.g. failed by a restart while the report waited
            return
        if measured is not None:
            self._executor.submit(self._run_refine, refine.id, measured, self._refine_budget_s)
        else:
            self._finish(
                refine.id,
                state="cancelled",
                message="not started: the clone's measurement did not finish",
            )

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

    def _resume_stranded_reports(self) -> None:
        """At start: a voice still waiting for a report that no job will make
        gets a report job now, or is settled when its last one failed for good
        (a report that crashed every worker must not be tried at every start)."""
        assert self._report_queue is not None and isinstance(self._jobs, SqlJobStore)
        for voice, last in stranded_voices(
            self._store, self._jobs, settled_before=settled_before()
        ):
            if last is not None and last.payload is not None and last.state != "succeeded":
                self._settle_unmeasured(task_of(last, None), last.message or "the report failed")
                continue
            self._report_queue.submit(
                voice.id,
                voice.owner,
                voice.version,
                None,
                keep_clone=bool(voice.quality.get("keep_clone", False)),
            )

    def _run_refine(self, job_id: str, record: VoiceRecord, budget_s: float) -> None:
        self._guarded(job_id, "refining", lambda: self._refine(job_id, record, budget_s))

    def _guarded(self, job_id: str, activity: str, body: Callable[[], _T]) -> _T | None:
        """Run a background job's ``body`` (None: it did not succeed); whatever
        happens, the job ends in a terminal state."""
        try:
            return body()
        except Cancelled:
            self._finish(job_id, state="cancelled", message="cancelled")
        except NotFound:
            self._finish(job_id, state="cancelled", message="the voice was deleted")
        except VoxcloneError as exc:
            self._finish(job_id, state="failed", message=exc.message, error=exc.to_body()["error"])
        except Exception:  # a background job must always end in a terminal state
            log.exception("%s failed", activity, extra={"job_id": job_id})
            message = f"internal error while {activity}"
            self._finish(
                job_id,
                state="failed",
                message=message,
                error={"code": "internal_error", "message": message},
            )
        return None

    def _refine(self, job_id: str, record: VoiceRecord, budget_s: float) -> None:
        if self._should_stop(job_id, record.id):
            raise Cancelled("cancelled")
        # The stored voice as it is now: a report job or an added recording may
        # have replaced the one this job was queued with.
        record = self._store.get(record.id, record.owner, include_reference_audio=False)
        self._update(job_id, state="running", progress=0.0, message="refining")
        last = [0.0]

        def on_progress(p: RefineProgress) -> None:
            percent = round(100.0 * p.fraction, 1)
            if percent - last[0] >= PROGRESS_STEP or percent >= 100.0:
                last[0] = percent
                self._update(job_id, progress=min(percent, 99.0), message="refining")

        start = self._start_recipe(record)
        refiner = self._refiner(budget_s)
        pitch_hz = float(record.quality.get("reference_pitch_hz") or 0.0)
        # A voice enrolled without tone matching stays without it.
        spectrum = record.reference_spectrum if record.tone_db is not None else None
        result, tone = self._pipeline_or_fail().refine(
            refiner,
            record.embedding,
            start,
            pitch_hz,
            spectrum,
            on_progress=on_progress,
            should_cancel=lambda: self._should_stop(job_id, record.id),
        )
        # The refiner checks only between auditions (and not at all once its
        # budget is spent): a cancel that came after its last check still wins.
        if self._should_stop(job_id, record.id):
            raise Cancelled("refinement was cancelled")
        tone_db = record.tone_db
        if result.improved and spectrum is not None:
            tone_db = None if tone is None else tone.gain_db
        quality = dict(record.quality)
        if result.improved:
            # The refined voice is an atlas voice: no longer the built-in it started from.
            quality.pop("replaced_by_stock_voice", None)
        quality.update(
            similarity=round(result.similarity, 4),
            wer=None if result.wer is None else round(result.wer, 4),
            style_recipe=recipe_to_json(result.recipe),
            refine={
                "improved": result.improved,
                "start_similarity": round(result.start_similarity, 4),
                "evaluations": result.evaluations,
                "seconds": round(result.seconds, 1),
                "notes": result.notes,
            },
        )
        try:
            updated = self._store.update_style(
                record.id,
                record.owner,
                style=result.style,
                quality=quality,
                source="refined",
                tone_db=tone_db,
                if_version=record.version,
            )
        except VoiceChanged as exc:
            # A recording was added while this ran: the refinement searched
            # for the old print and must not replace the newer voice.
            self._finish(
                job_id,
                state="cancelled",
                message="the voice changed while it was being refined (a recording was "
                "added); its newer version stands: refine again to refine that one",
                result={"voice_id": record.id, "version": exc.value},
            )
            return
        self._on_voice_changed(record.id)
        self._finish(
            job_id,
            state="succeeded",
            message="refined"
            if result.improved
            else "kept the instant voice (no better candidate)",
            result={
                "voice_id": record.id,
                "version": updated.version,
                "improved": result.improved,
                "similarity": round(result.similarity, 4),
                "start_similarity": round(result.start_similarity, 4),
                "wer": None if result.wer is None else round(result.wer, 4),
            },
        )

    def _start_recipe(self, record: VoiceRecord) -> VoiceRecipe:
        stored = record.quality.get("style_recipe")
        if isinstance(stored, dict):
            return recipe_from_json(stored)
        # Older records: derive the instant recipe again from the stored embedding.
        pitch_hz = float(record.quality.get("reference_pitch_hz") or 0.0)
        cloner = self._cloner_or_fail()
        return cloner.clone_from(record.embedding, PitchStats(pitch_hz, 0.0, 0.0, 0.0)).recipe

    def _update(self, job_id: str, **fields: Any) -> None:
        self._publish(self._jobs.update(job_id, **fields))

    def _finish(self, job_id: str, **fields: Any) -> None:
        # Deleted with its voice, or already terminal (e.g. cancelled while queued).
        with contextlib.suppress(VoxcloneError):
            self._update(job_id, **fields)

    def _publish(self, job: JobRecord) -> None:
        self._events.publish(job)

    def close(self) -> None:
        self._closing.set()
        if self._report_queue is not None:
            self._report_queue.close()
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._inline.close()
