"""Voice library use cases: enroll (instant clone + quality report), refine in
the background, rename, delete with everything derived from it, inline clones.

Enrollment follows the engine's ``clone_method``: ``"style"`` engines get an
atlas clone in their style space (instant clone, refinement, tone match);
``"prompt"`` engines get the engine's own conditioning prompt computed from
the same cleaned reference. Consent, the quality report and deletion are the
same for both.

Privacy (docs/design.md §1.5): consent is required and recorded as a hash of the
statement; raw reference audio is stored only when the user asks; deleting a
voice deletes its rows and jobs and tells the audio caches to drop what was
made with it (``on_voice_changed``).

VoiceService is the entry point, built from the four values of
setup.py (stores, cloning kit, hooks, policy); its parts live beside it in
this package: the request
values and checks (request.py), stored values and quality reports
(stored.py), its jobs (jobs.py), refinement (refine.py), report jobs
(report_measure.py, over the durable queue of report_queue.py), added
recordings (recordings.py) and inline voices (inline.py).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError as FutureCancelled
from dataclasses import replace
from typing import Any

import numpy as np

from voxclone.errors import Cancelled, InvalidInput, UnknownModel, VoxcloneError
from voxclone.runtime.job_store import JobRecord
from voxclone.runtime.voice_store import (
    LEGACY_ENGINE,
    LEGACY_MODEL_ID,
    ConsentRecord,
    VoiceRecord,
    VoiceSummary,
    utc_now_iso,
)
from voxclone.service.catalog import ResolvedVoice
from voxclone.service.job_voices import SPEECH_JOB_KIND
from voxclone.service.voices.admission import EnrollmentQueue, EnrollTicket, cancelled_by
from voxclone.service.voices.enroll_checks import check_given_by, check_name_free, voice_language
from voxclone.service.voices.inline import INLINE_ID_PREFIX, InlineVoices
from voxclone.service.voices.jobs import VoiceJobs
from voxclone.service.voices.recordings import AddedRecordings
from voxclone.service.voices.refine import Refinements
from voxclone.service.voices.report_measure import ReportJobs
from voxclone.service.voices.report_queue import ReportInputs, mark_pending
from voxclone.service.voices.request import (
    ConsentInput,
    DeletedVoice,
    Enrollment,
    EnrollRequest,
    PromptCloning,
    checked_consent,
    load_references,
    no_style_engine,
)
from voxclone.service.voices.setup import CloningKit, VoiceHooks, VoicePolicy, VoiceStores
from voxclone.service.voices.spoken_consent import (
    ConsentPhrase,
    ConsentPhrases,
)
from voxclone.service.voices.stored import clone_quality, prompt_quality, with_listener_prints
from voxclone.synth.audio.reference import ReferenceAudio, combine_references
from voxclone.synth.audio.warmup_clip import vowel_wav
from voxclone.synth.voice.pipeline import CloningPipeline
from voxclone.synth.voice.prosody import pitch_stats

log = logging.getLogger(__name__)


class VoiceService:
    def __init__(
        self,
        stores: VoiceStores,
        kit: CloningKit,
        hooks: VoiceHooks,
        policy: VoicePolicy | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Builds its parts; no I/O and no thread until :meth:`start`."""
        policy = policy or VoicePolicy()
        store, jobs, reporter = stores.voices, stores.jobs, kit.quality_reporter
        self._store = store
        self._deep_refiner = kit.deep_refiner
        self._listener_prints = (
            None if kit.deep_refiner is None else kit.deep_refiner.reference_embeddings
        )
        self._spoken_consent = kit.spoken_consent
        self._consent_clips = kit.consent_clips
        self.consent_phrases = ConsentPhrases(clock=clock)
        self._admission = EnrollmentQueue(slots=policy.enroll_slots, queue=policy.enroll_queue)
        self._purge = hooks.purge
        self._revoke_jobs = hooks.revoke_jobs
        self._jobs = jobs
        self._cloner = kit.cloner
        self._load_reference = kit.reference_loader
        self._on_voice_changed = hooks.on_voice_changed
        self._reporter = reporter
        # The style engine's cloning pipeline (None when no style engine is loaded).
        self._pipeline = (
            CloningPipeline(
                kit.cloner,
                probe=reporter.probe if reporter is not None else None,
                sample_rate=reporter.sample_rate if reporter is not None else 24_000,
                calibrator=kit.pitch_calibrator,
                follow_rate=policy.follow_rate,
                stock_check=policy.stock_check,
                stock_preference=policy.stock_preference,
                stock_probes=kit.stock_probes,
            )
            if kit.cloner is not None
            else None
        )
        self._closing = threading.Event()
        self._voice_jobs = VoiceJobs(jobs, stores.job_events, self._closing)
        self._refinements = Refinements(
            store=store,
            jobs=self._voice_jobs,
            source=kit.refiner,
            pipeline=self._pipeline,
            on_voice_changed=hooks.on_voice_changed,
            budget_s=policy.refine_budget_s,
            workers=policy.refine_workers,
            deep=kit.deep_refiner,
            deep_unavailable=kit.deep_refine_missing,
            default_method=policy.refine_method,
        )
        self._recordings = AddedRecordings(
            store=store,
            pipeline=self._pipeline,
            reporter=reporter,
            reference_loader=kit.reference_loader,
            on_voice_changed=hooks.on_voice_changed,
            listener_prints=self._listener_prints,
        )
        # The background half of ``wait=False`` enrollments, durable across
        # crashes (service/voices/report_queue.py); None: this process cannot measure
        # clones (no style engine) or has no durable queue, so enrollment waits.
        self._reports = (
            ReportJobs(
                store=store,
                jobs=stores.report_queue,
                events=stores.job_events,
                voice_jobs=self._voice_jobs,
                refinements=self._refinements,
                pipeline=self._pipeline,
                reporter=reporter,
                reference_loader=kit.reference_loader,
                on_voice_changed=hooks.on_voice_changed,
                closing=self._closing,
                listener_prints=self._listener_prints,
            )
            if self._pipeline is not None and stores.report_queue is not None
            else None
        )
        self._style_caps = kit.style_engine
        self._prompt_engines = dict(kit.prompt_engines)
        style_name = kit.style_engine.engine if kit.style_engine is not None else None
        self._default_engine = kit.default_engine or style_name
        self._resolve_model = kit.resolve_model
        self._inline = InlineVoices(
            on_voice_changed=hooks.on_voice_changed,
            inline_log=stores.inline_log,
            ttl_s=policy.inline_ttl_s,
            clock=clock,
            closing=self._closing,
        )

    def start(self) -> None:
        """Purge the audio of inline voices a previous process made and never
        purged, then start the report worker (its thread calls back into this
        service, so it starts last)."""
        self._inline.purge_orphaned()
        if self._reports is not None:
            self._reports.start()

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
            if self._deep_refiner is not None:
                # CAM++'s graph (an enrollment keeps its view of the reference)
                # loads here, not in the first clone's answer.
                self._deep_refiner.reference_embeddings([reference.samples16k])
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

    @property
    def pipeline(self) -> CloningPipeline | None:
        """The cloning pipeline enrollments run (None: no style engine), so a
        study can call the product's own steps (studies/stock_moved.py)."""
        return self._pipeline

    def _pipeline_or_fail(self) -> CloningPipeline:
        if self._pipeline is None:
            raise no_style_engine()
        return self._pipeline

    # -- enrollment ---------------------------------------------------------------
    def enroll(self, req: EnrollRequest) -> tuple[VoiceRecord, JobRecord | None]:
        """Clone, measure and store a voice; (record, refine job when asked)."""
        enrolled = self.start_enrollment(req, wait=True)
        return enrolled.record, enrolled.refine_job

    def admit_enrollment(
        self, *, wait: bool = True, model: str | None = None, deadline: float | None = None
    ) -> EnrollTicket:
        """A place in the enrollment queue, or Overloaded (503 + Retry-After)
        at once when the queue is full or the answer would come after
        ``deadline`` (time.monotonic); cheap, for the event loop. Pass it to
        :meth:`start_enrollment`, which releases it."""
        renders = wait or self._reports is None
        if not renders:  # a prompt engine always waits: its prompt is the clone
            renders = self._prompt_cloning(self._engine_for(model)) is not None
        return self._admission.admit(renders=renders, deadline=deadline)

    def enrollment_stats(self) -> dict[str, float]:
        """The enrollment queue now (running, waiting, drafts, estimate, refusals)."""
        return self._admission.stats()

    def start_enrollment(
        self,
        req: EnrollRequest,
        *,
        wait: bool = True,
        ticket: EnrollTicket | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Enrollment:
        """Enroll a voice. ``wait=False`` stores the atlas-lookup voice at once
        (~0.3 s after the upload is read on 2 cores: it can speak right away)
        and runs the renders in a report job: pitch calibration, tone match and
        the quality report (~5 s), which then replace the style as version 2.
        A requested refinement starts after that job. Prompt engines always
        wait (their prompt is the clone; there is nothing to defer), and so
        does a service without a durable job queue.

        ``ticket`` is the place :meth:`admit_enrollment` gave (None: one is
        taken now); it is released however this ends. An enrollment that
        waits stops, storing nothing, once ``cancelled()`` is true (its client
        went away): while it queues, at its next render, between its steps,
        and after the voice is stored (the voice is deleted again);
        ``wait=False`` never stops."""
        if ticket is None:
            ticket = self.admit_enrollment(wait=wait, model=req.model)
        completed = False
        gone = cancelled if ticket.renders else None
        try:
            with cancelled_by(gone):  # its renders stop too (enrollment_cancel_check)
                enrolled = self._enroll_in_turn(req, ticket, gone)
            completed = True
        except FutureCancelled:  # the scheduler dropped a render: its client left
            if gone is None or not gone():
                raise
            raise Cancelled(
                "the client went away; the enrollment stopped and stored nothing"
            ) from None
        finally:
            ticket.release(completed=completed)
        return enrolled

    def _enroll_in_turn(
        self, req: EnrollRequest, ticket: EnrollTicket, cancelled: Callable[[], bool] | None
    ) -> Enrollment:
        def stop_if_gone() -> None:
            if cancelled is not None and cancelled():
                raise Cancelled("the client went away; the enrollment stopped and stored nothing")

        consent = checked_consent(req.consent)
        prompt_engine = self._prompt_cloning(self._engine_for(req.model))
        if prompt_engine is not None and req.refine:
            raise InvalidInput(
                "refinement searches a style space; this engine clones from a prompt",
                field="refine",
            )
        req = self._checked_fields(req, prompt_engine)
        # Bad fields were refused above without waiting; the audio work waits its turn.
        ticket.wait_turn(cancelled)
        references = load_references(self._load_reference, (req.audio, *req.extra_audio))
        stop_if_gone()
        spoken = self._checked_spoken_consent(req, references)
        stop_if_gone()
        if prompt_engine is not None:
            reference = combine_references(references)
            prompted = self._enroll_prompt(
                req, consent, reference, prompt_engine, stop_if_gone, spoken=spoken
            )
            return Enrollment(self._kept_or_undone(prompted, stop_if_gone), None, None)
        engine, model_id, model_version = self._style_identity()
        pipeline = self._pipeline_or_fail()
        # What was admitted: a draft only when a report job can finish it.
        wait = ticket.renders
        started = time.perf_counter()
        voice_print = pipeline.voice_print(references)
        cloned = pipeline.draft(
            voice_print, started=started, print_seconds=time.perf_counter() - started
        )
        if wait:
            stop_if_gone()
            cloned = pipeline.finish(
                cloned,
                match_tone=req.match_tone,
                allow_stock=not req.keep_clone,
                language=req.language,
            )
        quality = clone_quality(self._reporter, pipeline, references, cloned)
        if wait:
            # Without waiting, the report job measures them: CAM++ takes up to
            # ~0.5 s on a long clip, kept out of the time to speakable.
            with_listener_prints(quality, self._listener_prints, references)
        stop_if_gone()
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
            spoken=spoken,
        )
        if wait:
            record = self._kept_or_undone(record, stop_if_gone)
            refine_job = self.start_refine(record.id, req.owner) if req.refine else None
            return Enrollment(record, None, refine_job)
        assert self._reports is not None
        refine_job = self._refinements.new_job(record) if req.refine else None
        report_job = self._reports.submit(
            record,
            ReportInputs(references, cloned),
            match_tone=req.match_tone,
            keep_clone=req.keep_clone,
            refine_job_id=None if refine_job is None else refine_job.id,
        )
        return Enrollment(record, report_job, refine_job)

    def _checked_fields(self, req: EnrollRequest, prompt: PromptCloning | None) -> EnrollRequest:
        """``req`` with its language as stored, once every field the store would
        refuse after the cloning work has been checked (service/voices/enroll_checks.py)."""
        check_name_free(self._store, req.name, req.owner)
        check_given_by(req.consent.given_by)
        caps = prompt.capabilities if prompt is not None else self._style_caps
        if caps is None or not caps.languages:  # wired without engine names (older tests)
            return req
        return replace(req, language=voice_language(req.language, caps.languages))

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
        stop_if_gone: Callable[[], None],
        *,
        spoken: dict[str, Any] | None = None,
    ) -> VoiceRecord:
        """The engine's conditioning from the cleaned reference, stored with the voice."""
        audio, rate = reference.samples16k, reference.sample_rate
        started = time.perf_counter()
        blob = cloning.make_prompt(audio, rate)
        clone_s = time.perf_counter() - started
        stop_if_gone()
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
            spoken=spoken,
        )

    def _kept_or_undone(self, record: VoiceRecord, stop_if_gone: Callable[[], None]) -> VoiceRecord:
        """``record`` when its client is still there; else deleted again, so no
        voice exists whose id nobody was told (issue 45: 3 of 8 abandoned
        enrollments did). What is left is the time to write the response."""
        try:
            stop_if_gone()
        except Cancelled:
            self._store.delete(record.id, record.owner)
            raise
        return record

    def _checked_spoken_consent(
        self, req: EnrollRequest, references: Sequence[ReferenceAudio]
    ) -> dict[str, Any] | None:
        """What the spoken-consent check measured (None: typed consent), or the
        refusal (422 naming consent_audio) before any cloning work."""
        if req.spoken_consent is None:
            return None
        if self._spoken_consent is None or self._consent_clips is None:
            raise InvalidInput(
                "this server cannot check spoken consent (no speech recognizer or blob store)",
                field="consent_audio",
            )
        try:
            clip = self._load_reference(req.spoken_consent.audio)
        except VoxcloneError as exc:
            exc.message = f"consent clip: {exc.message}"
            exc.args = (exc.message,)
            exc.field = "consent_audio"
            raise
        return self._spoken_consent.verify(req.spoken_consent.phrase, clip, references)

    def issue_consent_phrase(self, owner: str) -> ConsentPhrase:
        """A phrase for ``owner`` to read for one enrollment (single use)."""
        return self.consent_phrases.issue(owner)

    def consent_clip(self, voice_id: str, owner: str) -> tuple[bytes, dict[str, Any]] | None:
        """The owner's voice's consent clip and what was checked (None: typed consent)."""
        self._store.get(voice_id, owner, include_reference_audio=False)  # owner only
        return self._consent_clips.get(voice_id) if self._consent_clips is not None else None

    def _create(
        self,
        req: EnrollRequest,
        consent: ConsentRecord,
        *,
        embedding: np.ndarray,
        spoken: dict[str, Any] | None = None,
        **fields: Any,
    ) -> VoiceRecord:
        """Store a new instant voice for ``req`` (``fields``: what the clone made)
        and, with spoken consent, its consent clip beside it (the voice is
        deleted again when the clip cannot be kept: no voice without its proof)."""
        record = self._create_record(req, consent, embedding=embedding, **fields)
        if spoken is not None and req.spoken_consent is not None:
            assert self._consent_clips is not None
            try:
                self._consent_clips.put(record.id, req.spoken_consent.audio, spoken)
            except Exception:
                self._store.delete(record.id, record.owner)
                raise
        return record

    def _create_record(
        self, req: EnrollRequest, consent: ConsentRecord, *, embedding: np.ndarray, **fields: Any
    ) -> VoiceRecord:
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
        """Pool more recordings into a stored voice and clone it again (a new
        version; service/voices/recordings.py)."""
        return self._recordings.add(voice_id, owner, audio)

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
        recordings = self._store.kept_recordings([voice_id])  # for the receipt
        clips = self._consent_clip_count(voice_id)
        self._voice_jobs.voice_deleted(voice_id)  # running refines see this and stop
        voice_jobs: list[str] = []
        for job in self._jobs.list(owner, limit=1000):
            if job.voice_id != voice_id or job.kind == SPEECH_JOB_KIND:
                continue
            voice_jobs.append(job.id)  # deleted with the voice below
            # Not speech jobs: they are revoked below, so they end
            # "failed: voice_deleted" with their audio purged, not "cancelled".
            if not job.done:
                self._voice_jobs.cancel(job.id, owner)
        # Saved blends made from it go in the same transaction (their style is
        # derived from this voice's recording, docs/design.md §1.5).
        record, *derived = self._store.delete_with_derived(voice_id, owner)
        deleted_at = utc_now_iso()
        self._jobs.delete_for_voice(voice_id, keep_kinds=(SPEECH_JOB_KIND,))
        revoked: tuple[str, ...] = ()
        if self._revoke_jobs is not None:
            try:
                listed = self._revoke_jobs([gone.id for gone in (record, *derived)])
                # SpeechJobs.revoke_voice_jobs names them; older callers count.
                revoked = tuple(listed) if isinstance(listed, list) else ()
            except Exception:  # the voice is gone: the job worker's sweep revokes them
                log.warning("revoking the jobs of a deleted voice postponed", exc_info=True)
        pending = False
        entries: int | None = 0
        for gone in (record, *derived):
            if self._purge is not None:
                done = self._purge(gone.id)
                # CachePurger.purge_counted: a count or None (postponed);
                # CachePurger.purge: True/False, no count.
                pending = done is None or done is False or pending
                if isinstance(done, bool) or done is None or entries is None:
                    entries = None  # postponed, or a purge that does not count
                else:
                    entries += done
            else:
                self._on_voice_changed(gone.id)
                entries = None
        return DeletedVoice(
            record,
            purge_pending=pending,
            derived=tuple(derived),
            deleted_at=deleted_at,
            recordings=recordings,
            consent_clips=clips,
            cache_entries=entries,
            jobs_revoked=revoked,
            jobs_deleted=tuple(voice_jobs),
        )

    def _consent_clip_count(self, voice_id: str) -> int | None:
        """1 when the voice keeps a consent clip (purged with its blobs), else
        0; None when the blob store cannot say (the receipt says unknown)."""
        if self._consent_clips is None:
            return 0
        try:
            return 0 if self._consent_clips.get(voice_id) is None else 1
        except Exception:  # unreachable: the deletion goes on, the purge is journaled
            log.warning("consent clip count of a deleted voice unknown", exc_info=True)
            return None

    # -- refinement ---------------------------------------------------------------
    def start_refine(
        self, voice_id: str, owner: str, budget_s: float | None = None, method: str | None = None
    ) -> JobRecord:
        return self._refinements.start(voice_id, owner, budget_s, method)

    @property
    def deep_refine_missing(self) -> str | None:
        """Why this server cannot deep-refine (None: it can)."""
        return self._refinements.deep_unavailable

    def get_job(self, job_id: str, owner: str) -> JobRecord:
        return self._voice_jobs.get(job_id, owner)

    def cancel_job(self, job_id: str, owner: str) -> JobRecord:
        return self._voice_jobs.cancel(job_id, owner)

    def close(self) -> None:
        self._closing.set()
        if self._reports is not None:
            self._reports.close()
        self._refinements.close()
        self._inline.close()
