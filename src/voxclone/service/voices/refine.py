"""Refinement of a stored style voice: a background job that auditions atlas
voices (then optionally prosody variants) for the stored print within a time
budget and stores the best as the voice's next version, unless the voice
changed meanwhile. A refinement that finds nothing better leaves the voice as
it was: same version, same source (it stored the unchanged voice as a new
"refined" version, so a voice that still spoke as its instant clone said
``version 3, source: refined``); the job's result says what was tried."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from voxclone.errors import Cancelled, InvalidInput, NotFound, VoiceChanged
from voxclone.runtime.job_store import JobRecord
from voxclone.runtime.voice_store import VoiceRecord, VoiceStore
from voxclone.service.voices.jobs import VoiceJobs
from voxclone.service.voices.request import no_style_engine, refuse_blend
from voxclone.service.voices.stored import recipe_from_json, recipe_to_json
from voxclone.synth.audio.tone import ToneFilter
from voxclone.synth.voice.clone import RefineProgress, StyleRefiner
from voxclone.synth.voice.deep_voice import DeepVoiceRefiner
from voxclone.synth.voice.pipeline import CloningPipeline
from voxclone.synth.voice.prosody import PitchStats
from voxclone.synth.voice.style_space import VoiceRecipe

REFINE_JOB_KIND = "refine"
# "atlas": audition atlas voices (and prosody variants) within a budget;
# "deep": descend on the timbre through the differentiable Kokoro (issue 47),
# where the [deep] extra is installed.
REFINE_METHODS = ("atlas", "deep")
MAX_REFINE_BUDGET_S = 1800.0
PROGRESS_STEP = 1.0  # percent; fewer store writes for a smooth bar

RefinerSource = StyleRefiner | Callable[[float], StyleRefiner]


class Refinements:
    def __init__(
        self,
        *,
        store: VoiceStore,
        jobs: VoiceJobs,
        source: RefinerSource | None,
        pipeline: CloningPipeline | None,
        on_voice_changed: Callable[[str], None],
        budget_s: float,
        workers: int,
        deep: DeepVoiceRefiner | None = None,
        deep_unavailable: str | None = None,
        default_method: str = "atlas",
    ) -> None:
        """``source`` and ``pipeline`` are the style engine's (None when no
        style engine is loaded); ``budget_s`` is a refinement's default budget;
        ``deep``: the deep refine (None: not installed, ``deep_unavailable`` says
        why); ``default_method``: what a refine naming none runs ("deep" falls
        back to "atlas" where the deep refine is missing)."""
        self._store = store
        self._jobs = jobs
        self._source = source
        self._pipeline = pipeline
        self._on_voice_changed = on_voice_changed
        self._budget_s = budget_s
        self._deep = deep
        self._deep_unavailable = deep_unavailable or "the deep refine is not set up"
        self._default_method = default_method if deep is not None else "atlas"
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="refine")

    @property
    def deep_available(self) -> bool:
        return self._deep is not None

    @property
    def deep_unavailable(self) -> str | None:
        """Why a deep refine cannot run here (None: it can)."""
        return None if self._deep is not None else self._deep_unavailable

    def start(
        self,
        voice_id: str,
        owner: str,
        budget_s: float | None = None,
        method: str | None = None,
    ) -> JobRecord:
        method = method or self._default_method
        if method not in REFINE_METHODS:
            raise InvalidInput(
                f"refine method must be one of {', '.join(REFINE_METHODS)}",
                field="method",
                value=method,
            )
        if method == "deep" and self._deep is None:
            raise InvalidInput(
                f"this server cannot run a deep refine: {self._deep_unavailable}",
                field="method",
                value=method,
            )
        budget = self._budget_s if budget_s is None else float(budget_s)
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
        job = self.new_job(record)
        if method == "deep":
            self._executor.submit(self._run_deep, job.id, record)
        else:
            self._executor.submit(self._run, job.id, record, budget)
        return job

    def new_job(self, record: VoiceRecord) -> JobRecord:
        """A refine job that starts later (``after_report``)."""
        return self._jobs.new(REFINE_JOB_KIND, record)

    def after_report(self, job_id: str, measured: VoiceRecord | None) -> None:
        """Start the refinement queued behind a report job (``measured``: the
        voice it stored), or cancel it when no measurement came."""
        try:
            refine = self._jobs.get(job_id, None)
        except NotFound:
            return
        if refine.done:  # e.g. failed by a restart while the report waited
            return
        if measured is not None and self._default_method == "deep":
            self._executor.submit(self._run_deep, refine.id, measured)
        elif measured is not None:
            self._executor.submit(self._run, refine.id, measured, self._budget_s)
        else:
            self._jobs.finish(
                refine.id,
                state="cancelled",
                message="not started: the clone's measurement did not finish",
            )

    def close(self) -> None:
        """After the owner's ``closing`` is set: running refinements stop, queued ones go."""
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _run(self, job_id: str, record: VoiceRecord, budget_s: float) -> None:
        self._jobs.guarded(job_id, "refining", lambda: self._refine(job_id, record, budget_s))

    def _run_deep(self, job_id: str, record: VoiceRecord) -> None:
        self._jobs.guarded(job_id, "refining", lambda: self._deep_refine(job_id, record))

    def _deep_refine(self, job_id: str, record: VoiceRecord) -> None:
        jobs = self._jobs
        deep = self._deep
        assert deep is not None  # start() refuses first
        if jobs.should_stop(job_id, record.id):
            raise Cancelled("cancelled")
        record = self._store.get(record.id, record.owner, include_reference_audio=False)
        if record.style is None:
            raise InvalidInput("only voices of a style engine can be refined", field="voice_id")
        jobs.update(job_id, state="running", progress=0.0, message="deep refining")
        on_progress = self._progress(job_id, "deep refining")
        tone = None if record.tone_db is None else ToneFilter(record.tone_db)
        outcome = deep.refine(
            record.style,
            reference_embeddings(record),
            tone,
            on_progress=on_progress,
            should_cancel=lambda: jobs.should_stop(job_id, record.id),
        )
        if jobs.should_stop(job_id, record.id):
            raise Cancelled("refinement was cancelled")
        summary = {
            "method": "deep",
            "improved": outcome.improved,
            "heard_before": outcome.before,
            "heard_after": outcome.after,
            "wer_before": _rounded(outcome.wer_before),
            "wer_after": _rounded(outcome.wer_after),
            "steps": outcome.steps,
            "best_step": outcome.best_step,
            "seconds": round(outcome.seconds, 1),
            "notes": outcome.notes,
        }
        result = {
            "voice_id": record.id,
            "method": "deep",
            "improved": outcome.improved,
            "similarity": round(outcome.similarity, 4),
            "start_similarity": round(outcome.start_similarity, 4),
            "wer": _rounded(outcome.wer_after if outcome.improved else outcome.wer_before),
        }
        if not outcome.improved:
            jobs.finish(
                job_id,
                state="succeeded",
                message="kept the voice as it was (the deep refine was not heard closer "
                "on other sentences)",
                result={**result, "version": record.version, "refine": summary},
            )
            return
        quality = dict(record.quality)
        quality["verdict"] = (
            f"speaks as its deep-refined clone: heard {outcome.similarity:.2f} from the "
            f"reference on sentences the refine never heard, {outcome.start_similarity:.2f} "
            "before"
        )
        quality.update(
            timbre_offset=[round(float(x), 6) for x in outcome.offset],
            refine=summary,
        )
        self._store_refined(
            job_id,
            record,
            outcome.pack,
            quality,
            record.tone_db,
            "deep refined",
            {**result, "refine": summary},
        )

    def _refiner(self, budget_s: float) -> StyleRefiner:
        source = self._source
        if source is None:
            raise no_style_engine()
        if isinstance(source, StyleRefiner):
            return source.with_budget(budget_s)
        return source(budget_s)

    def _refine(self, job_id: str, record: VoiceRecord, budget_s: float) -> None:
        jobs = self._jobs
        if jobs.should_stop(job_id, record.id):
            raise Cancelled("cancelled")
        # The stored voice as it is now: a report job or an added recording may
        # have replaced the one this job was queued with.
        record = self._store.get(record.id, record.owner, include_reference_audio=False)
        jobs.update(job_id, state="running", progress=0.0, message="refining")
        pipeline = self._pipeline
        if pipeline is None:  # start() refuses first; the report queue needs one too
            raise no_style_engine()
        report = self._progress(job_id, "refining")

        def on_progress(p: RefineProgress) -> None:
            report(p.fraction)

        start = self._start_recipe(record, pipeline)
        refiner = self._refiner(budget_s)
        pitch_hz = float(record.quality.get("reference_pitch_hz") or 0.0)
        # A voice enrolled without tone matching stays without it.
        spectrum = record.reference_spectrum if record.tone_db is not None else None
        result, tone = pipeline.refine(
            refiner,
            record.embedding,
            start,
            pitch_hz,
            spectrum,
            on_progress=on_progress,
            should_cancel=lambda: jobs.should_stop(job_id, record.id),
        )
        # The refiner checks only between auditions (and not at all once its
        # budget is spent): a cancel that came after its last check still wins.
        if jobs.should_stop(job_id, record.id):
            raise Cancelled("refinement was cancelled")
        outcome = {
            "voice_id": record.id,
            "improved": result.improved,
            "similarity": round(result.similarity, 4),
            "start_similarity": round(result.start_similarity, 4),
            "wer": None if result.wer is None else round(result.wer, 4),
        }
        if not result.improved:
            jobs.finish(
                job_id,
                state="succeeded",
                message="kept the voice as it was (no better candidate)",
                result={**outcome, "version": record.version},
            )
            return
        tone_db = record.tone_db
        if spectrum is not None:
            tone_db = None if tone is None else tone.gain_db
        quality = dict(record.quality)
        # The refined voice is an atlas voice: no longer the built-in (moved or
        # plain, before issue 47) it started from.
        for key in ("replaced_by_stock_voice", "started_from_builtin", "clone_share"):
            quality.pop(key, None)
        # The enrollment's verdict and gain describe the voice this one replaces.
        quality["verdict"] = (
            f"speaks as its refined clone: similarity {result.similarity:.2f} to the "
            f"reference, {result.start_similarity:.2f} before the refinement"
        )
        if quality.get("stock_similarity") is not None:
            quality["gain_over_stock"] = round(result.similarity - quality["stock_similarity"], 4)
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
        self._store_refined(job_id, record, result.style, quality, tone_db, "refined", outcome)

    def _progress(self, job_id: str, message: str) -> Callable[[float], None]:
        """A job's progress from a fraction done, written at most every
        PROGRESS_STEP percent (fewer store writes) and below 100 until it ends."""
        last = [0.0]

        def report(fraction: float) -> None:
            percent = round(100.0 * fraction, 1)
            if percent - last[0] >= PROGRESS_STEP or percent >= 100.0:
                last[0] = percent
                self._jobs.update(job_id, progress=min(percent, 99.0), message=message)

        return report

    def _store_refined(
        self,
        job_id: str,
        record: VoiceRecord,
        style: np.ndarray,
        quality: dict[str, object],
        tone_db: np.ndarray | None,
        message: str,
        result: dict[str, object],
    ) -> None:
        """Store a refinement's voice as the next version and finish its job,
        unless the voice changed while it ran."""
        jobs = self._jobs
        try:
            updated = self._store.update_style(
                record.id,
                record.owner,
                style=style,
                quality=quality,
                source="refined",
                tone_db=tone_db,
                if_version=record.version,
            )
        except VoiceChanged as exc:
            # A recording was added while this ran: the refinement searched
            # for the old print and must not replace the newer voice.
            jobs.finish(
                job_id,
                state="cancelled",
                message="the voice changed while it was being refined (a recording was "
                "added); its newer version stands: refine again to refine that one",
                result={"voice_id": record.id, "version": exc.value},
            )
            return
        self._on_voice_changed(record.id)
        jobs.finish(
            job_id,
            state="succeeded",
            message=message,
            result={**result, "version": updated.version},
        )

    @staticmethod
    def _start_recipe(record: VoiceRecord, pipeline: CloningPipeline) -> VoiceRecipe:
        stored = record.quality.get("style_recipe")
        if isinstance(stored, dict):
            return recipe_from_json(stored)
        # Older records: derive the instant recipe again from the stored embedding.
        pitch_hz = float(record.quality.get("reference_pitch_hz") or 0.0)
        return pipeline.cloner.clone_from(
            record.embedding, PitchStats(pitch_hz, 0.0, 0.0, 0.0)
        ).recipe


def reference_embeddings(record: VoiceRecord) -> dict[str, np.ndarray]:
    """The reference as each listener heard it at enrollment: the product
    encoder's (GE2E) print, and CAM++'s where the enrollment measured it."""
    refs = {"ge2e": np.asarray(record.embedding, np.float32)}
    stored = record.quality.get("listener_embeddings")
    if isinstance(stored, dict):
        for name, vector in stored.items():
            if isinstance(vector, list) and vector:
                refs[str(name)] = np.asarray(vector, np.float32)
    return refs


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
