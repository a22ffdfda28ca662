"""SpeechControls: range validation, preset resolution, explicit overrides."""

from __future__ import annotations

import math

import numpy as np
import pytest

from voxclone.errors import InvalidInput
from voxclone.synth.audio.effects import true_peak_dbfs
from voxclone.synth.audio.post import PEAK_CEILING_DBFS, apply_controls
from voxclone.synth.controls import EMOTIONS, ResolvedControls, SpeechControls


@pytest.mark.parametrize(
    ("field", "value", "limit"),
    [
        ("speed", 0.49, [0.5, 2.0]),
        ("speed", 2.01, [0.5, 2.0]),
        ("pitch", -0.51, [-0.5, 0.5]),
        ("pitch", 0.6, [-0.5, 0.5]),
        ("energy", 0.79, [0.8, 1.2]),
        ("energy", 1.3, [0.8, 1.2]),
        ("intensity", -0.1, [0.0, 1.0]),
        ("intensity", 1.5, [0.0, 1.0]),
        ("speed", math.nan, [0.5, 2.0]),
        ("pitch", math.inf, [-0.5, 0.5]),
        ("energy", "loud", [0.8, 1.2]),
        ("speed", True, [0.5, 2.0]),
    ],
)
def test_out_of_range_names_field_and_limit(field: str, value: object, limit: list[float]) -> None:
    with pytest.raises(InvalidInput) as caught:
        SpeechControls(**{field: value})  # type: ignore[arg-type]
    assert caught.value.field == field
    assert caught.value.limit == limit
    assert str(limit[0]) in caught.value.message and str(limit[1]) in caught.value.message


def test_unknown_emotion_lists_the_allowed_ones() -> None:
    with pytest.raises(InvalidInput) as caught:
        SpeechControls(emotion="furious")
    assert caught.value.field == "emotion"
    assert caught.value.limit == list(EMOTIONS)
    assert "whisper" in caught.value.message


def test_bounds_are_inclusive_and_values_normalised() -> None:
    controls = SpeechControls(speed=2, pitch=-0.5, energy="1.2", emotion=" Happy ", intensity=0)  # type: ignore[arg-type]
    assert controls.speed == 2.0 and isinstance(controls.speed, float)
    assert controls.energy == 1.2
    assert controls.emotion == "happy"


def test_neutral_default_resolves_to_identity() -> None:
    assert SpeechControls().resolve() == ResolvedControls()


@pytest.mark.parametrize("emotion", sorted(EMOTIONS))
def test_every_preset_resolves_inside_the_ranges(emotion: str) -> None:
    resolved = SpeechControls(emotion=emotion).resolve()
    preset = EMOTIONS[emotion]
    assert 0.5 <= resolved.speed <= 2.0
    assert -0.5 <= resolved.pitch <= 0.5
    assert 0.8 <= resolved.energy <= 1.2
    assert resolved.pitch == pytest.approx(preset.pitch)
    assert resolved.speed == pytest.approx(preset.speed)
    assert resolved.f0_range == pytest.approx(preset.f0_range)
    assert resolved.pause == pytest.approx(preset.pause)
    assert resolved.whisper == preset.whisper
    assert preset.description


def test_non_neutral_presets_change_something() -> None:
    for name in EMOTIONS:
        if name != "neutral":
            assert SpeechControls(emotion=name).resolve() != ResolvedControls(), name


def test_intensity_scales_the_preset_linearly() -> None:
    full = SpeechControls(emotion="sad").resolve()
    half = SpeechControls(emotion="sad", intensity=0.5).resolve()
    none = SpeechControls(emotion="sad", intensity=0.0).resolve()
    assert half.pitch == pytest.approx(full.pitch / 2)
    assert half.speed == pytest.approx(1.0 + (full.speed - 1.0) / 2)
    assert half.pause == pytest.approx(1.0 + (full.pause - 1.0) / 2)
    assert none == ResolvedControls()


def test_explicit_parameters_override_the_preset() -> None:
    resolved = SpeechControls(emotion="sad", speed=1.5, pitch=0.3, energy=1.1).resolve()
    assert (resolved.speed, resolved.pitch, resolved.energy) == (1.5, 0.3, 1.1)
    # What the user did not set still comes from the preset.
    assert resolved.f0_range == pytest.approx(EMOTIONS["sad"].f0_range)
    assert resolved.pause == pytest.approx(EMOTIONS["sad"].pause)


def test_cache_parts_distinguish_settings() -> None:
    assert SpeechControls(pitch=0.1).cache_parts() != SpeechControls(pitch=0.2).cache_parts()
    assert (
        SpeechControls(emotion="HAPPY").cache_parts()
        == SpeechControls(emotion="happy").cache_parts()
    )


def test_apply_controls_never_exceeds_the_peak_ceiling() -> None:
    sr = 24_000
    t = np.arange(sr // 2) / sr
    # A full-scale harmonic tone: energy 1.2 adds gain, so only the limiter keeps it legal.
    tone = (0.99 * np.sign(np.sin(2 * np.pi * 180 * t)) * np.hanning(t.size) ** 0.1).astype(
        np.float32
    )
    for controls in (ResolvedControls(), ResolvedControls(energy=1.2, pitch=0.3)):
        out = apply_controls(tone, sr, controls)
        assert out.shape == tone.shape and out.dtype == np.float32
        assert true_peak_dbfs(out) <= PEAK_CEILING_DBFS + 1e-3
