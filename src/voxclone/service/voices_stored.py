"""Values kept in a stored voice record and read back from it: the pooled
speaker print, the style recipe as JSON, a prompt voice's quality report."""

from __future__ import annotations

from typing import Any

import numpy as np

from voxclone.runtime.voice_store import VoiceRecord
from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.voice.pipeline import VoicePrint
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
