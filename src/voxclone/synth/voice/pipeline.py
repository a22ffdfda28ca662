"""The cloning pipeline: one or more references → a voice that speaks like them.

    references → voice print (embedding, pitch, long-term spectrum; pooled
    over clips, weighted by their speech seconds) → instant clone (atlas
    lookup) → spoken voice (pitch-calibrated, with the probe sentence) →
    [a chooser hook: none in the service; the benchmark's audition,
    bench/audition.py, hears the atlas's nearest speak] →
    recording-tone filter → stock check (the built-in voices of the
    reference's sex closest by the atlas, given the same tone, are heard; when
    the product encoder does not hear the clone closer to the reference by
    more than ``STOCK_PREFERENCE``, the closest built-in is moved toward the
    reference and speaks instead: synth/voice/stock_check.py, stock_move.py)

The lookup alone (:meth:`CloningPipeline.draft`) is a voice that can speak
at once; the renders after it (:meth:`CloningPipeline.finish`, ~5 s on 2
cores) are what a server may run in the background (``wait=false``
enrollment in ``VoiceService.enroll_instant``). And, later, the refinement
wiring (alternatives that speak with the start's calibrated prosody half,
the winner's tone from the probe sentence).

``VoiceService`` and the benchmarks (``bench/clone_eval.py``,
``studies/pick_study.py``, ``studies/reference_robustness.py``) all call this
object, so what is measured is what the product does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import soxr

from voxclone.synth.audio.tone import ToneFilter, long_term_spectrum, tone_filter_for
from voxclone.synth.voice.clone import (
    ENCODER_RATE,
    InstantClone,
    InstantCloner,
    RefineProgress,
    RefineResult,
    StyleRefiner,
)
from voxclone.synth.voice.pitch_calibration import PitchCalibrator, ProbeFn
from voxclone.synth.voice.probe_store import StockProbeStore
from voxclone.synth.voice.prosody import PitchStats, pitch_stats, speaking_rate
from voxclone.synth.voice.rate_match import follow_speed
from voxclone.synth.voice.speaker_encoder import cosine, crop_averaged_embedding, normalize
from voxclone.synth.voice.stock_check import STOCK_PREFERENCE, StockCheck, StockComparison
from voxclone.synth.voice.stock_move import MovedVoice, closest_moved
from voxclone.synth.voice.style_space import VoiceRecipe


class SpeechClip(Protocol):
    """What the pipeline needs of a prepared reference (``ReferenceAudio``)."""

    @property
    def samples16k(self) -> np.ndarray: ...

    @property
    def speech_seconds(self) -> float: ...


@dataclass(frozen=True)
class VoicePrint:
    """What a voice is cloned from, pooled over its recordings."""

    embedding: np.ndarray  # product encoder, L2-normalized
    pitch: PitchStats
    spectrum: np.ndarray | None  # long-term spectrum in dB (synth/audio/tone.py)
    speech_seconds: float  # total, the weight of this print when pooled again
    clips: int
    rate: float = 0.0  # prosody.speaking_rate (peaks per second of speech); 0.0 = unknown
    # The chooser hook's own embedding of the references
    # (VoiceChooser.embed_reference); None: no chooser wired (the service).
    listener_embedding: np.ndarray | None = None

    def pitch_json(self) -> dict[str, float]:
        p = self.pitch
        return {
            "median_hz": round(p.median_hz, 2),
            "low_hz": round(p.low_hz, 2),
            "high_hz": round(p.high_hz, 2),
            "voiced_fraction": round(p.voiced_fraction, 4),
        }


def pool_prints(prints: Sequence[VoicePrint]) -> VoicePrint:
    """Duration-weighted pooling: the mean embedding (re-normalized), pitch
    statistics averaged in octaves over the prints that have them, and the
    spectra averaged in dB (each is level-normalized already)."""
    if not prints:
        raise ValueError("at least one voice print is needed")
    if len(prints) == 1:
        return prints[0]
    weights = np.array([max(p.speech_seconds, 1e-3) for p in prints], dtype=np.float64)
    pairs = list(zip(weights, prints, strict=True))
    embedding = normalize(np.sum([w * p.embedding.astype(np.float64) for w, p in pairs], axis=0))
    spectra = [(w, p.spectrum) for w, p in pairs if p.spectrum is not None]
    rates = [(w, p.rate) for w, p in pairs if p.rate > 0]
    rate = float(sum(w * r for w, r in rates) / sum(w for w, _ in rates)) if rates else 0.0
    listener_embedding = None
    if all(p.listener_embedding is not None for p in prints):
        listener_embedding = normalize(
            np.sum([w * np.asarray(p.listener_embedding, np.float64) for w, p in pairs], axis=0)
        ).astype(np.float32)
    spectrum = None
    if spectra:
        total = sum(w for w, _ in spectra)
        spectrum = (sum(w * s.astype(np.float64) for w, s in spectra) / total).astype(np.float32)
    return VoicePrint(
        embedding=embedding.astype(np.float32),
        pitch=_pool_pitch([p.pitch for p in prints], weights),
        spectrum=spectrum,
        speech_seconds=float(sum(p.speech_seconds for p in prints)),
        clips=sum(p.clips for p in prints),
        rate=rate,
        listener_embedding=listener_embedding,
    )


def _pool_pitch(stats: Sequence[PitchStats], weights: np.ndarray) -> PitchStats:
    """Weighted means in octaves over the clips where a pitch was found."""
    voiced = [(w, s) for w, s in zip(weights, stats, strict=True) if s.median_hz > 0]
    if not voiced:
        return PitchStats(0.0, 0.0, 0.0, 0.0)

    def log_mean(values: list[tuple[float, float]]) -> float:
        values = [(w, v) for w, v in values if v > 0]
        if not values:
            return 0.0
        total = sum(w for w, _ in values)
        return float(2.0 ** (sum(w * np.log2(v) for w, v in values) / total))

    total = sum(w for w, _ in voiced)
    return PitchStats(
        log_mean([(w, s.median_hz) for w, s in voiced]),
        log_mean([(w, s.low_hz) for w, s in voiced]),
        log_mean([(w, s.high_hz) for w, s in voiced]),
        float(sum(w * s.voiced_fraction for w, s in voiced) / total),
    )


@dataclass(frozen=True)
class SpokenVoice:
    recipe: VoiceRecipe
    style: np.ndarray
    probe: np.ndarray | None  # the quality report's test sentence in this voice
    calibration: dict[str, Any] | None  # pitch calibration figures, when one ran
    measured_hz: float = 0.0  # probe's median F0 after calibration (0.0: not calibrated)
    seconds: float = 0.0  # calibration and probe renders


class ChosenVoice(Protocol):
    """The voice a :class:`VoiceChooser` kept, spoken."""

    @property
    def recipe(self) -> VoiceRecipe: ...

    @property
    def style(self) -> np.ndarray: ...

    @property
    def probe(self) -> np.ndarray: ...

    @property
    def tone(self) -> ToneFilter | None: ...

    @property
    def seconds(self) -> float: ...


class VoiceChooser(Protocol):
    """A hook that may choose another voice than the atlas lookup's, by hearing
    candidates speak. The service wires none; the benchmark's audition
    (bench/audition.py) is one, measured and not adopted (docs/studies.md)."""

    def embed_reference(self, samples16k: np.ndarray) -> np.ndarray:
        """The chooser's own embedding of one reference clip (16 kHz), kept on
        the print as ``VoicePrint.listener_embedding`` and pooled with it."""
        ...

    def choose(
        self,
        cloner: InstantCloner,
        voice_print: VoicePrint,
        voice: SpokenVoice,
        *,
        render: ProbeFn,
        tone_for: Callable[[np.ndarray], ToneFilter | None],
        sample_rate: int,
    ) -> ChosenVoice | None:
        """The voice to serve instead of ``voice`` (the calibrated lookup), or
        None to keep it; ``render`` speaks the probe sentence with a style
        pack, ``tone_for`` gives a probe the reference's recording tone."""
        ...


@dataclass(frozen=True)
class ClonedVoice:
    print: VoicePrint
    instant: InstantClone
    voice: SpokenVoice
    tone: ToneFilter | None  # None when tone matching is off or unmeasurable
    print_seconds: float  # embeddings, pitch and spectra of the references
    seconds: float  # the whole clone, end to end
    # The clone's own speaking rate on the probe (0.0: not measured) and the
    # speed that moves it towards the reference's pace (synth/voice/rate_match.py).
    rate: float = 0.0
    speed: float = 1.0
    # The stock check's built-in moved toward the reference, when that built-in
    # was heard about as close as the clone (synth/voice/stock_move.py); None
    # when the clone stayed. The voice is never a plain built-in.
    moved: MovedVoice | None = None
    # What the stock check heard (None: no check ran); the quality report's
    # closest built-in and its verdict come from this one comparison.
    comparison: StockComparison | None = None
    # The chooser hook's voice, served instead of the lookup (None: no chooser,
    # or it kept the lookup).
    chosen: ChosenVoice | None = None

    @property
    def instant_seconds(self) -> float:
        """Voice print + atlas lookup (what "instant clone" has always timed)."""
        return self.print_seconds + self.instant.seconds


class CloningPipeline:
    def __init__(
        self,
        cloner: InstantCloner,
        *,
        probe: ProbeFn | None,
        sample_rate: int = 24_000,
        calibrator: PitchCalibrator | None = None,
        follow_rate: bool = True,
        stock_check: bool = True,
        stock_preference: float = STOCK_PREFERENCE,
        chooser: VoiceChooser | None = None,
        stock_probes: StockProbeStore | None = None,
    ) -> None:
        """``probe`` renders the quality report's test sentence with a style pack
        (None: no probe, so no tone match and no calibration); ``calibrator``
        moves the prosody half until that sentence has the reference's F0;
        ``follow_rate`` gives the clone a speed towards the reference's pace;
        ``stock_check`` lets a built-in voice the encoder hears closer replace
        the clone, unless the clone is heard closer by more than
        ``stock_preference`` (synth/voice/stock_check.py); ``chooser`` may
        replace the calibrated lookup before the stock check (:class:`VoiceChooser`;
        it needs a probe); ``stock_probes``: the built-ins' probe renders kept
        on disk (probe_store.py)."""
        self._cloner = cloner
        self._stock_probes = stock_probes
        self._probe = probe
        self._rate = sample_rate
        self._calibrator = calibrator
        self._follow_rate = follow_rate
        self._stock_check = stock_check
        self._chooser = chooser
        self._stock_preference = stock_preference
        self._stock: StockCheck | None = None
        self._stock_lock = threading.Lock()  # warm-up thread and enrollments ask at once

    @property
    def cloner(self) -> InstantCloner:
        return self._cloner

    @property
    def sample_rate(self) -> int:
        return self._rate

    @property
    def stock(self) -> StockCheck:
        """The stock check (synth/voice/stock_check.py), heard like this pipeline hears."""
        # The built-ins heard like the clone (its encoder and tone match); there
        # with the check off too, for the benchmarks and studies that hear them.
        # Built when first asked: a cloner without an atlas (a plug-in's, a
        # test's stand-in) still clones when nothing asks for the built-ins.
        with self._stock_lock:
            if self._stock is None:
                self._stock = StockCheck(
                    self._cloner.atlas,
                    probe=self._probe,
                    tone_for=self.tone_for,
                    hear=self.heard_similarity,
                    preference=self._stock_preference,
                    stored=self._stock_probes,
                )
            return self._stock

    def closest_stock(
        self, voice_print: VoicePrint, language: str | None = None
    ) -> tuple[str, float] | None:
        """(name, product-encoder cosine) of the closest built-in voice of the
        reference's sex by the atlas's embeddings (``VoiceAtlas.closest_builtin``):
        what the report compares with when the stock check heard nothing."""
        pitch = voice_print.pitch.median_hz
        return self._cloner.atlas.closest_builtin(
            voice_print.embedding, pitch_hz=pitch if pitch > 0 else None, language=language
        )

    def voice_print(self, references: Sequence[SpeechClip]) -> VoicePrint:
        """The pooled print of one speaker's references."""
        prints = [
            VoicePrint(
                embedding=self.reference_embedding(ref.samples16k),
                pitch=pitch_stats(ref.samples16k, ENCODER_RATE),
                spectrum=long_term_spectrum(ref.samples16k, ENCODER_RATE),
                speech_seconds=float(ref.speech_seconds),
                clips=1,
                rate=speaking_rate(ref.samples16k, ENCODER_RATE),
                listener_embedding=self._chooser.embed_reference(ref.samples16k)
                if self._chooser is not None
                else None,
            )
            for ref in references
        ]
        return pool_prints(prints)

    def reference_embedding(self, x16k: np.ndarray) -> np.ndarray:
        """The product encoder's embedding of a reference, averaged over crops
        that start ``REFERENCE_CROPS_S`` into it (re-normalized).

        Why: the encoder averages 1.6 s windows laid every 0.77 s from the
        clip's first sample after its own VAD trim, so the same speech decoded
        from another container (codec noise flips a VAD frame, the start moves
        a few ms) is cut into other windows. One clip's embedding was at cosine
        0.9982 between its WAV and its Ogg Opus with one window grid, 0.9996
        over the four; with the probes heard the same way
        (:meth:`heard_similarity`) and the codec padding cut, the stock check's
        lead over 7 containers spread 0.0088 and 0.0099 on the two clips of
        tests/data instead of 0.0243 and 0.0195, most of the 0.03 preference
        (studies/container_decision.py)."""
        return crop_averaged_embedding(self._cloner.encoder, x16k)

    def clone(
        self,
        references: Sequence[SpeechClip],
        *,
        match_tone: bool = True,
        allow_stock: bool = True,
        language: str | None = None,
    ) -> ClonedVoice:
        started = time.perf_counter()
        voice_print = self.voice_print(references)
        print_seconds = time.perf_counter() - started
        return self.clone_print(
            voice_print,
            match_tone=match_tone,
            allow_stock=allow_stock,
            started=started,
            print_seconds=print_seconds,
            language=language,
        )

    def clone_print(
        self,
        voice_print: VoicePrint,
        *,
        match_tone: bool = True,
        allow_stock: bool = True,
        started: float | None = None,
        print_seconds: float = 0.0,
        language: str | None = None,
    ) -> ClonedVoice:
        """Clone from a print already measured (e.g. a stored voice's, pooled with a new clip)."""
        draft = self.draft(voice_print, started=started, print_seconds=print_seconds)
        return self.finish(draft, match_tone=match_tone, allow_stock=allow_stock, language=language)

    def draft(
        self,
        voice_print: VoicePrint,
        *,
        started: float | None = None,
        print_seconds: float = 0.0,
    ) -> ClonedVoice:
        """The atlas lookup alone: a voice that can speak at once, before any
        render (no probe, so no pitch calibration, tone match or report yet).
        :meth:`finish` turns it into the full clone."""
        started = time.perf_counter() if started is None else started
        instant = self._cloner.clone_from(
            voice_print.embedding,
            voice_print.pitch,
            spectrum=voice_print.spectrum,
            rate=voice_print.rate,
        )
        voice = SpokenVoice(instant.recipe, instant.style, None, None)
        return ClonedVoice(
            voice_print, instant, voice, None, print_seconds, time.perf_counter() - started
        )

    def finish(
        self,
        draft: ClonedVoice,
        *,
        match_tone: bool = True,
        allow_stock: bool = True,
        language: str | None = None,
    ) -> ClonedVoice:
        """``draft`` spoken (pitch-calibrated, with the probe sentence) and, with
        ``match_tone``, given the reference's recording tone; with the pipeline's
        stock check on, compared with the built-in voices of the reference's sex
        (and of ``language``, the voice's, where it has some), and with
        ``allow_stock`` the closest of them may replace it."""
        began = time.perf_counter()
        voice_print = draft.print
        voice = self.speak(draft.instant.recipe, voice_print.pitch.median_hz)
        spectrum = voice_print.spectrum if match_tone else None
        chosen = None
        if self._chooser is not None and self._probe is not None:
            chosen = self._chooser.choose(
                self._cloner,
                voice_print,
                voice,
                render=self._probe,
                tone_for=lambda probe: self.tone_for(spectrum, probe),
                sample_rate=self._rate,
            )
        if chosen is not None:
            voice = SpokenVoice(
                chosen.recipe,
                chosen.style,
                chosen.probe,
                voice.calibration,
                0.0,
                voice.seconds + chosen.seconds,
            )
            tone = chosen.tone
        else:
            tone = self.tone_for(spectrum, voice.probe)
        comparison = None
        if self._stock_check:
            comparison = self.stock.compare(
                voice_print, voice, tone, spectrum, language=language, allow_stock=allow_stock
            )
        moved = None
        if comparison is not None and comparison.replaced:
            candidates = self.stock.move(voice_print, comparison.best, voice, spectrum)
            moved = closest_moved(candidates)
            tone = moved.tone
            voice = SpokenVoice(
                moved.recipe,
                moved.style,
                moved.probe,
                voice.calibration,
                0.0,
                voice.seconds,
            )
        rate = 0.0
        if voice.probe is not None:
            probe16 = soxr.resample(voice.probe, self._rate, ENCODER_RATE).astype(np.float32)
            rate = speaking_rate(probe16, ENCODER_RATE)
        speed = follow_speed(voice_print.rate, rate) if self._follow_rate else 1.0
        seconds = draft.seconds + time.perf_counter() - began
        return ClonedVoice(
            voice_print,
            draft.instant,
            voice,
            tone,
            draft.print_seconds,
            seconds,
            rate,
            speed,
            moved,
            comparison,
            chosen,
        )

    def warm_stock_probes(self) -> None:
        """The built-ins' probe sentences rendered now, when the stock check is
        on (:meth:`StockCheck.warm_probes`)."""
        if self._stock_check:
            self.stock.warm_probes()

    def heard_similarity(
        self, voice_print: VoicePrint, probe: np.ndarray, tone: ToneFilter | None
    ) -> float:
        """Product-encoder cosine of ``probe`` (as heard: with ``tone``) to the
        print, the probe embedded like a reference (:meth:`reference_embedding`):
        the clones made from the WAV and the MP3 of tests/data's female clip,
        calibrated 0.15 semitone apart, were heard 0.0123 apart with one window
        grid and 0.0035 apart over the four (measured once, by hand, for
        issue 47; the leads: studies/container_decision.py)."""
        heard = probe if tone is None else tone.apply(probe, self._rate)
        heard16 = soxr.resample(heard, self._rate, ENCODER_RATE).astype(np.float32)
        return cosine(self.reference_embedding(heard16), voice_print.embedding)

    def speak(self, recipe: VoiceRecipe, pitch_hz: float) -> SpokenVoice:
        """``recipe`` made to speak at ``pitch_hz`` (when a calibrator is wired),
        with its probe sentence: the audio the tone match and the quality
        report are derived from."""
        began = time.perf_counter()
        pack = self._cloner.atlas.basis.pack
        if self._calibrator is not None and self._probe is not None:
            calibrated = self._calibrator.calibrate(recipe, pitch_hz)
            info = {
                "clone_pitch_hz": round(calibrated.measured_hz, 1),
                "shift_semitones": round(12.0 * calibrated.shift_octaves, 2),
                "renders": calibrated.syntheses,
            }
            return SpokenVoice(
                calibrated.recipe,
                pack(calibrated.recipe),
                calibrated.probe,
                info,
                calibrated.measured_hz,
                time.perf_counter() - began,
            )
        style = pack(recipe)
        probe = self._probe(style) if self._probe is not None else None
        return SpokenVoice(recipe, style, probe, None, 0.0, time.perf_counter() - began)

    def tone_for(self, spectrum: np.ndarray | None, probe: np.ndarray | None) -> ToneFilter | None:
        """The reference's recording tone for a voice heard in ``probe`` (None: no match)."""
        if spectrum is None or probe is None:
            return None
        return tone_filter_for(spectrum, probe, self._rate)

    def refine(
        self,
        refiner: StyleRefiner,
        embedding: np.ndarray,
        start: VoiceRecipe,
        pitch_hz: float,
        spectrum: np.ndarray | None,
        *,
        on_progress: Callable[[RefineProgress], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> tuple[RefineResult, ToneFilter | None]:
        """Refine ``start`` (the stored, calibrated instant voice); returns the
        result and, when it improved and ``spectrum`` is given, its tone derived
        like at enrollment (from the probe sentence). The winner keeps the pitch
        it was heard with: re-pitching it after the choice undid the gain
        (docs/benchmarks.md, cloning ablation)."""
        # Alternatives speak with the start's (pitch-calibrated) prosody half.
        alternatives = self._cloner.alternatives(
            embedding, pitch_hz, refiner.config.auditions, prosody=start.prosody_weights
        )
        result = refiner.refine(
            embedding,
            start,
            reference_spectrum=spectrum,
            alternatives=alternatives,
            prosodies=self._cloner.prosody_alternatives(pitch_hz, refiner.config.prosody_auditions),
            on_progress=on_progress,
            should_cancel=should_cancel,
        )
        tone = None
        if result.improved and spectrum is not None and self._probe is not None:
            tone = self.tone_for(spectrum, self._probe(result.style))
        return result, tone
