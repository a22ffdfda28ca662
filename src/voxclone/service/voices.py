"""Voice library use cases: enroll (instant clone + quality report), refine in
the background, rename, delete with everything derived from it, inline clones.

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
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from voxclone.errors import Cancelled, InvalidInput, NotFound, VoxcloneError
from voxclone.runtime.job_store import JobEvents, JobRecord, JobStore
from voxclone.runtime.voice_store import (
    ConsentRecord,
    VoiceRecord,
    VoiceStore,
    VoiceSummary,
    utc_now_iso,
)
from voxclone.service.catalog import ResolvedVoice
from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.audio.tone import ToneFilter, long_term_spectrum, tone_filter_for
from voxclone.synth.voice.clone import (
    InstantCloner,
    RefineConfig,
    RefineProgress,
    StyleRefiner,
)
from voxclone.synth.voice.pitch_calibration import PitchCalibrator
from voxclone.synth.voice.prosody import PitchStats
from voxclone.synth.voice.quality_report import QualityReporter, reference_warnings
from voxclone.synth.voice.style_space import VoiceRecipe

if TYPE_CHECKING:
    from voxclone.config import Settings
    from voxclone.runtime.scheduler import Scheduler
    from voxclone.synth.engine.kokoro import KokoroEngine
    from voxclone.synth.text.protocol import G2P

log = logging.getLogger(__name__)

REFINE_JOB_KIND = "refine"
MAX_REFINE_BUDGET_S = 1800.0
STATEMENT_MAX_CHARS = 2000
INLINE_CACHE_ENTRIES = 32
PROGRESS_STEP = 1.0  # percent; fewer store writes for a smooth bar


@dataclass(frozen=True)
class ConsentInput:
    given: bool
    statement: str
    given_by: str
    client_address: str | None = None


@dataclass(frozen=True)
class EnrollRequest:
    audio: bytes
    name: str
    owner: str
    consent: ConsentInput
    language: str = "en-us"
    keep_reference: bool = False
    refine: bool = False
    # Give the clone the reference recording's tone (long-term spectrum).
    match_tone: bool = True


RefinerSource = StyleRefiner | Callable[[float], StyleRefiner]


@dataclass(frozen=True)
class SpokenVoice:
    recipe: VoiceRecipe
    style: np.ndarray
    probe: np.ndarray | None  # the quality report's test sentence in this voice
    calibration: dict[str, Any] | None  # pitch calibration figures, when one ran


class VoiceService:
    def __init__(
        self,
        *,
        store: VoiceStore,
        jobs: JobStore,
        job_events: JobEvents,
        cloner: InstantCloner,
        refiner_factory_or_refiner: RefinerSource,
        reference_loader: Callable[[bytes], ReferenceAudio],
        on_voice_changed: Callable[[str], None],
        refine_budget_s: float = 180.0,
        quality_reporter: QualityReporter | None = None,
        pitch_calibrator: PitchCalibrator | None = None,
        refine_workers: int = 1,
    ) -> None:
        self._store = store
        self._jobs = jobs
        self._events = job_events
        self._cloner = cloner
        self._refiner_source = refiner_factory_or_refiner
        self._load_reference = reference_loader
        self._on_voice_changed = on_voice_changed
        self._refine_budget_s = refine_budget_s
        self._reporter = quality_reporter
        self._calibrator = pitch_calibrator
        self._executor = ThreadPoolExecutor(max_workers=refine_workers, thread_name_prefix="refine")
        self._closing = threading.Event()
        self._deleted_lock = threading.Lock()
        self._deleted: set[str] = set()
        self._inline: OrderedDict[str, ResolvedVoice] = OrderedDict()
        self._inline_lock = threading.Lock()

    def warmup(self) -> None:
        """Load the speaker encoder before the first request (call at start-up)."""
        self._cloner.warmup()

    # -- enrollment ---------------------------------------------------------------
    def enroll(self, req: EnrollRequest) -> tuple[VoiceRecord, JobRecord | None]:
        consent = _checked_consent(req.consent)
        reference = self._load_reference(req.audio)
        clone = self._cloner.clone(reference.samples16k)
        voice = self._spoken(clone.recipe, clone.pitch.median_hz)
        spectrum, tone = self._tone_of(reference, voice.probe, match=req.match_tone)
        quality = self._quality(reference, clone.embedding, voice.probe, tone, clone.pitch)
        quality["style_recipe"] = _recipe_to_json(voice.recipe)
        quality["instant_clone_s"] = round(clone.seconds, 3)
        quality["tone_match"] = tone is not None
        if voice.calibration is not None:
            quality["pitch_calibration"] = voice.calibration
        record = self._store.create(
            VoiceRecord(
                id="",
                name=req.name,
                language=req.language,
                owner=req.owner,
                created_at="",
                updated_at="",
                version=1,
                consent=consent,
                embedding=clone.embedding.astype(np.float32),
                style=voice.style.astype(np.float32),
                quality=quality,
                source="instant",
                reference_audio=req.audio if req.keep_reference else None,
                reference_spectrum=spectrum,
                tone_db=None if tone is None else tone.gain_db,
            )
        )
        job = self.start_refine(record.id, req.owner) if req.refine else None
        return record, job

    def _spoken(self, recipe: VoiceRecipe, pitch_hz: float) -> SpokenVoice:
        """``recipe`` made to speak at ``pitch_hz`` (when a calibrator is wired),
        with its probe sentence: the audio the tone match and the quality
        report are derived from."""
        if self._calibrator is not None:
            calibrated = self._calibrator.calibrate(recipe, pitch_hz)
            info = {
                "clone_pitch_hz": round(calibrated.measured_hz, 1),
                "shift_semitones": round(12.0 * calibrated.shift_octaves, 2),
                "renders": calibrated.syntheses,
            }
            style = self._cloner.atlas.basis.pack(calibrated.recipe)
            return SpokenVoice(calibrated.recipe, style, calibrated.probe, info)
        style = self._cloner.atlas.basis.pack(recipe)
        probe = self._reporter.probe(style) if self._reporter is not None else None
        return SpokenVoice(recipe, style, probe, None)

    def _tone_of(
        self, reference: ReferenceAudio, probe: np.ndarray | None, *, match: bool
    ) -> tuple[np.ndarray | None, ToneFilter | None]:
        """(reference spectrum, tone filter) for a new voice heard in ``probe``.

        The spectrum is kept even when ``match`` is off, so the tone can be
        matched later.
        """
        spectrum = long_term_spectrum(reference.samples16k, reference.sample_rate)
        return spectrum, self._tone_for(spectrum if match else None, probe)

    def _tone_for(self, spectrum: np.ndarray | None, probe: np.ndarray | None) -> ToneFilter | None:
        """The reference's recording tone for a voice heard in ``probe`` (None: no match)."""
        if spectrum is None or probe is None or self._reporter is None:
            return None
        return tone_filter_for(spectrum, probe, self._reporter.sample_rate)

    def _quality(
        self,
        reference: ReferenceAudio,
        embedding: np.ndarray,
        probe: np.ndarray | None,
        tone: ToneFilter | None,
        pitch: PitchStats,
    ) -> dict[str, Any]:
        if self._reporter is not None and probe is not None:
            heard = probe if tone is None else tone.apply(probe, self._reporter.sample_rate)
            report = self._reporter.report(
                reference, embedding, heard, reference_pitch_hz=pitch.median_hz
            )
            return report.to_dict()
        return {
            "similarity": None,
            "wer": None,
            "warnings": reference_warnings(reference, None),
            "reference_seconds": round(reference.speech_seconds, 2),
            "reference_pitch_hz": round(pitch.median_hz, 1),
        }

    def inline_voice(self, audio: bytes) -> ResolvedVoice:
        """Instant clone for one request; never stored (cached briefly by content hash)."""
        voice_id = "inline-" + hashlib.sha256(audio).hexdigest()[:16]
        with self._inline_lock:
            hit = self._inline.get(voice_id)
            if hit is not None:
                self._inline.move_to_end(voice_id)
                return hit
        reference = self._load_reference(audio)
        clone = self._cloner.clone(reference.samples16k)
        spoken = self._spoken(clone.recipe, clone.pitch.median_hz)
        _, tone = self._tone_of(reference, spoken.probe, match=True)
        voice = ResolvedVoice(voice_id, "inline reference", 1, spoken.style, None, False, tone)
        with self._inline_lock:
            self._inline[voice_id] = voice
            while len(self._inline) > INLINE_CACHE_ENTRIES:
                self._inline.popitem(last=False)
        return voice

    # -- library ------------------------------------------------------------------
    def get(self, voice_id: str, owner: str) -> VoiceRecord:
        return self._store.get(voice_id, owner, include_reference_audio=False)

    def list(self, owner: str) -> list[VoiceSummary]:
        return self._store.list(owner, limit=1000, offset=0)

    def rename(self, voice_id: str, owner: str, name: str) -> VoiceRecord:
        return self._store.rename(voice_id, owner, name)

    def delete(self, voice_id: str, owner: str) -> VoiceRecord:
        # Check ownership first so another owner's id behaves like a missing one.
        self._store.get(voice_id, owner, include_reference_audio=False)
        with self._deleted_lock:
            self._deleted.add(voice_id)  # running refines see this and stop
        for job in self._jobs.list(owner, limit=1000):
            if job.voice_id == voice_id and not job.done:
                self._publish(self._jobs.request_cancel(job.id, owner))
        record = self._store.delete(voice_id, owner)
        self._jobs.delete_for_voice(voice_id)
        self._on_voice_changed(voice_id)
        return record

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
        job = self._jobs.create(kind=REFINE_JOB_KIND, owner=owner, voice_id=voice_id)
        self._publish(job)
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

    def _run_refine(self, job_id: str, record: VoiceRecord, budget_s: float) -> None:
        try:
            if self._should_stop(job_id, record.id):
                self._finish(job_id, state="cancelled", message="cancelled")
                return
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
            # Alternatives speak with the start's (pitch-calibrated) prosody half.
            alternatives = self._cloner.alternatives(
                record.embedding, pitch_hz, refiner.config.auditions, prosody=start.prosody_weights
            )
            # A voice enrolled without tone matching stays without it.
            spectrum = record.reference_spectrum if record.tone_db is not None else None
            result = refiner.refine(
                record.embedding,
                start,
                reference_spectrum=spectrum,
                alternatives=alternatives,
                prosodies=self._cloner.prosody_alternatives(
                    pitch_hz, refiner.config.prosody_auditions
                ),
                on_progress=on_progress,
                should_cancel=lambda: self._should_stop(job_id, record.id),
            )
            # The refiner checks only between auditions (and not at all once its
            # budget is spent): a cancel that came after its last check still wins.
            if self._should_stop(job_id, record.id):
                raise Cancelled("refinement was cancelled")
            tone_db = record.tone_db
            if result.improved and spectrum is not None:
                # Derived like at enrollment (from the report's probe sentence), so
                # an instant and a refined voice get their tone the same way. The
                # pitch is left as heard: the refiner chose this voice as it
                # sounded, and re-pitching it after the choice undid the gain
                # (docs/benchmarks.md, cloning ablation).
                probe = self._reporter.probe(result.style) if self._reporter else None
                tone = self._tone_for(spectrum, probe)
                tone_db = None if tone is None else tone.gain_db
            quality = dict(record.quality)
            quality.update(
                similarity=round(result.similarity, 4),
                wer=None if result.wer is None else round(result.wer, 4),
                style_recipe=_recipe_to_json(result.recipe),
                refine={
                    "improved": result.improved,
                    "start_similarity": round(result.start_similarity, 4),
                    "evaluations": result.evaluations,
                    "seconds": round(result.seconds, 1),
                    "notes": result.notes,
                },
            )
            updated = self._store.update_style(
                record.id,
                record.owner,
                style=result.style,
                quality=quality,
                source="refined",
                tone_db=tone_db,
            )
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
        except Cancelled:
            self._finish(job_id, state="cancelled", message="cancelled")
        except NotFound:
            self._finish(job_id, state="cancelled", message="the voice was deleted")
        except VoxcloneError as exc:
            self._finish(job_id, state="failed", message=exc.message, error=exc.to_body()["error"])
        except Exception:  # a background job must always end in a terminal state
            log.exception("refine job failed", extra={"job_id": job_id})
            self._finish(
                job_id,
                state="failed",
                message="internal error while refining",
                error={"code": "internal_error", "message": "internal error while refining"},
            )

    def _start_recipe(self, record: VoiceRecord) -> VoiceRecipe:
        stored = record.quality.get("style_recipe")
        if isinstance(stored, dict):
            return _recipe_from_json(stored)
        # Older records: derive the instant recipe again from the stored embedding.
        pitch_hz = float(record.quality.get("reference_pitch_hz") or 0.0)
        return self._cloner.clone_from(record.embedding, PitchStats(pitch_hz, 0.0, 0.0, 0.0)).recipe

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
        self._executor.shutdown(wait=True, cancel_futures=True)


def _checked_consent(consent: ConsentInput) -> ConsentRecord:
    if consent.given is not True:
        raise InvalidInput(
            "consent is required: the speaker must agree to having their voice cloned",
            field="consent",
        )
    statement = (consent.statement or "").strip()
    if not statement or len(statement) > STATEMENT_MAX_CHARS:
        raise InvalidInput(
            f"a consent statement of 1 to {STATEMENT_MAX_CHARS} characters is required",
            field="consent.statement",
            limit=STATEMENT_MAX_CHARS,
        )
    return ConsentRecord(
        statement_sha256=hashlib.sha256(statement.encode("utf-8")).hexdigest(),
        given_by=consent.given_by,
        given_at=utc_now_iso(),
        client_address=consent.client_address,
    )


def _recipe_to_json(recipe: VoiceRecipe) -> dict[str, list[float]]:
    return {
        "timbre_weights": [round(float(x), 6) for x in recipe.timbre_weights],
        "timbre_coeffs": [round(float(x), 6) for x in recipe.timbre_coeffs],
        "prosody_weights": [round(float(x), 6) for x in recipe.prosody_weights],
    }


def _recipe_from_json(data: dict[str, Any]) -> VoiceRecipe:
    return VoiceRecipe(
        np.asarray(data["timbre_weights"], np.float32),
        np.asarray(data["timbre_coeffs"], np.float32),
        np.asarray(data["prosody_weights"], np.float32),
    )


REFINE_SENTENCES = (
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
)


def build_voice_service(
    settings: Settings,
    engine: KokoroEngine,
    g2p: G2P,
    scheduler: Scheduler,
    store: VoiceStore,
    on_voice_changed: Callable[[str], None],
    *,
    jobs: JobStore | None = None,
    job_events: JobEvents | None = None,
) -> VoiceService:
    """Wire the cloning stack for the composition root."""
    from functools import partial

    from voxclone.runtime.cache import EmbeddingCache
    from voxclone.runtime.job_store import SqliteJobStore
    from voxclone.runtime.scheduler import PRIORITY_BACKGROUND, PRIORITY_NORMAL
    from voxclone.synth.audio.reference import prepare_reference
    from voxclone.synth.audio.vad import SpeechDetector
    from voxclone.synth.engine.base import SynthItem
    from voxclone.synth.voice.asr import Transcriber, word_error_rate
    from voxclone.synth.voice.atlas import VoiceAtlas
    from voxclone.synth.voice.encoder import SpeakerEncoder
    from voxclone.synth.voice.quality_report import TEST_SENTENCE

    encoder = SpeakerEncoder(cache=EmbeddingCache())
    atlas = VoiceAtlas.load(engine.assets.packs)
    cloner = InstantCloner(atlas, encoder)
    transcriber = Transcriber()

    def tokens(text: str) -> tuple[int, ...]:
        return g2p.token_ids(g2p.phonemize(text, "en-us"))

    def synth_foreground(tok: tuple[int, ...], pack: np.ndarray) -> np.ndarray:
        return scheduler.run(SynthItem(tok, pack, 1.0), priority=PRIORITY_NORMAL)

    def synth_background(tok: tuple[int, ...], pack: np.ndarray) -> np.ndarray:
        # Refinement yields to live requests.
        return scheduler.run(SynthItem(tok, pack, 1.0), priority=PRIORITY_BACKGROUND)

    refiner = StyleRefiner(
        atlas,
        encoder,
        synth_background,
        [tokens(s) for s in REFINE_SENTENCES],
        list(REFINE_SENTENCES),
        transcribe=transcriber.transcribe,
        word_error_rate=word_error_rate,
        config=RefineConfig(
            auditions=settings.refine_auditions,
            prosody_auditions=settings.refine_prosody_auditions,
            search=settings.refine_search,
        ),
    )
    reporter = QualityReporter(
        encoder,
        synth_foreground,
        tokens(TEST_SENTENCE),
        transcribe=transcriber.transcribe,
        word_error_rate=word_error_rate,
    )
    detector = SpeechDetector()
    loader = partial(
        prepare_reference,
        detector=detector,
        max_bytes=int(settings.max_upload_mb * (1 << 20)),
        max_seconds=settings.max_reference_seconds,
    )
    return VoiceService(
        store=store,
        jobs=jobs if jobs is not None else SqliteJobStore(settings.db_path),
        job_events=job_events if job_events is not None else JobEvents(),
        cloner=cloner,
        refiner_factory_or_refiner=refiner,
        reference_loader=loader,
        on_voice_changed=on_voice_changed,
        refine_budget_s=settings.refine_budget_s,
        quality_reporter=reporter,
        pitch_calibrator=PitchCalibrator(atlas, reporter.probe, reporter.sample_rate)
        if settings.clone_pitch_calibration
        else None,
    )
