"""Values kept in a stored voice record and read back from it: the pooled
speaker print, the style recipe as JSON, the quality report of a style clone
(with what re-cloning it later needs) and of a prompt voice."""

from __future__ import annotations

from collections.abc import Sequence
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
