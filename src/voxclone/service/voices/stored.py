"""Values kept in a stored voice record and read back from it: the pooled
speaker print, the style recipe as JSON, the quality report of a style clone
(with what re-cloning it later needs) and of a prompt voice."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from voxclone.runtime.voice_store import VoiceRecord
from voxclone.synth.audio.reference import ReferenceAudio, combine_references
from voxclone.synth.voice.pipeline import ClonedVoice, CloningPipeline, VoicePrint
from voxclone.synth.voice.prosody import PitchStats
from voxclone.synth.voice.quality_report import QualityReporter, reference_warnings
from voxclone.synth.voice.style_space import VoiceRecipe


def stored_print(record: VoiceRecord) -> VoicePrint | None:
    """A stored voice's pooled print (None: too old a record to pool with)."""
    quality = record.quality
    seconds = float(quality.get("reference_seconds") or 0.0)
    if seconds <= 0:
        return None
    stats = quality.get("reference_pitch")
    if isinstance(stats, dict):
        pitch = PitchStats(
            float(stats["median_hz"]),
            float(stats["low_hz"]),
            float(stats["high_hz"]),
            float(stats["voiced_fraction"]),
        )
    else:  # older records keep the median only
        pitch = PitchStats(float(quality.get("reference_pitch_hz") or 0.0), 0.0, 0.0, 0.0)
    return VoicePrint(
        embedding=np.asarray(record.embedding, np.float32),
        pitch=pitch,
        spectrum=record.reference_spectrum,
        speech_seconds=seconds,
        clips=int(quality.get("clips", 1)),
        rate=float(quality.get("reference_rate") or 0.0),  # older records: unknown
    )


def recipe_to_json(recipe: VoiceRecipe) -> dict[str, list[float]]:
    return {
        "timbre_weights": [round(float(x), 6) for x in recipe.timbre_weights],
        "timbre_coeffs": [round(float(x), 6) for x in recipe.timbre_coeffs],
        "prosody_weights": [round(float(x), 6) for x in recipe.prosody_weights],
    }


def recipe_from_json(data: dict[str, Any]) -> VoiceRecipe:
    return VoiceRecipe(
        np.asarray(data["timbre_weights"], np.float32),
        np.asarray(data["timbre_coeffs"], np.float32),
        np.asarray(data["prosody_weights"], np.float32),
    )


def prompt_quality(
    reporter: QualityReporter | None,
    reference: ReferenceAudio,
    embedding: np.ndarray,
    probe: np.ndarray | None,
    pitch: PitchStats,
) -> dict[str, Any]:
    """The quality report of a prompt voice (its test sentence heard as spoken)."""
    if reporter is not None and probe is not None:
        return reporter.report(
            reference, embedding, probe, reference_pitch_hz=pitch.median_hz
        ).to_dict()
    return {
        "similarity": None,
        "wer": None,
        "warnings": reference_warnings(reference, None),
        "reference_seconds": round(reference.speech_seconds, 2),
        "reference_pitch_hz": round(pitch.median_hz, 1),
    }


def clone_quality(
    reporter: QualityReporter | None,
    pipeline: CloningPipeline,
    references: Sequence[ReferenceAudio],
    cloned: ClonedVoice,
) -> dict[str, Any]:
    """The quality report of a new clone, plus what re-cloning it later needs."""
    reference = combine_references(references)
    voice, pitch = cloned.voice, cloned.print.pitch
    if reporter is not None and voice.probe is not None:
        tone, rate = cloned.tone, reporter.sample_rate

        def as_heard(audio: np.ndarray) -> np.ndarray:
            return audio if tone is None else tone.apply(audio, rate)

        quality = reporter.report(
            reference,
            cloned.print.embedding,
            as_heard(voice.probe),
            reference_pitch_hz=pitch.median_hz,
            style=voice.style,
            heard=as_heard,
            # One comparison for the stock check and the report (issue 40);
            # without a heard one, the atlas's closest of the same sex.
            stock=None if cloned.comparison is not None else pipeline.closest_stock(cloned.print),
            comparison=cloned.comparison,
            moved=cloned.moved,
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
    if cloned.moved is not None:
        # The clone was not heard closer than this built-in by the stock
        # preference: the built-in, moved toward the reference, speaks
        # (synth/voice/stock_move.py). Voices stored before issue 47 may
        # still carry ``replaced_by_stock_voice`` (a plain built-in, toned).
        quality["started_from_builtin"] = cloned.moved.started_from
        quality["clone_share"] = cloned.moved.clone_share
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


# The deep refine's listeners other than the product encoder, each hearing the
# enrollment's clips (16 kHz): name -> unit mean embedding
# (synth/voice/deep_voice.DeepVoiceRefiner.reference_embeddings).
ListenerPrints = Callable[[Sequence[np.ndarray]], dict[str, list[float]]]

LISTENER_PRINTS_KEY = "listener_embeddings"


def with_listener_prints(
    quality: dict[str, Any],
    listener_prints: ListenerPrints | None,
    references: Sequence[ReferenceAudio],
    *,
    earlier: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``quality`` with the reference as the deep refine's other listeners hear
    it: measured on ``references`` when they carry audio, else kept from the
    ``earlier`` quality (a report job resumed after a crash has no audio).
    A refine later has no audio to measure them on: none is kept unless asked."""
    clips = [r.samples16k for r in references if len(r.samples16k)]
    if listener_prints is not None and clips:
        measured = listener_prints(clips)
        if measured:
            quality[LISTENER_PRINTS_KEY] = measured
            return quality
    kept = (earlier or {}).get(LISTENER_PRINTS_KEY)
    if isinstance(kept, dict) and kept:
        quality[LISTENER_PRINTS_KEY] = kept
    return quality


def pooled_listener_prints(
    earlier: dict[str, Any], earlier_seconds: float, added: dict[str, Any], added_seconds: float
) -> dict[str, list[float]]:
    """Listener prints of a voice's stored recordings pooled with those of
    recordings added to it, weighted by speech seconds as the product
    encoder's print is (pipeline.pool_prints); a listener only one side has
    is taken as it is."""
    old = earlier.get(LISTENER_PRINTS_KEY) if isinstance(earlier, dict) else None
    new = added.get(LISTENER_PRINTS_KEY) if isinstance(added, dict) else None
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    pooled: dict[str, list[float]] = {}
    for name in old.keys() | new.keys():
        if name in old and name in new and earlier_seconds > 0:
            mean = max(earlier_seconds, 1e-3) * np.asarray(old[name], np.float64) + max(
                added_seconds, 1e-3
            ) * np.asarray(new[name], np.float64)
            unit = mean / max(float(np.linalg.norm(mean)), 1e-12)
            pooled[name] = [round(float(x), 6) for x in unit]
        else:
            pooled[name] = list(new.get(name) or old[name])
    return pooled
