"""Quality-report warnings with a stand-in encoder (no models)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.voice.quality_report import reference_warnings, speaker_consistency

SR = 16_000


class PitchEncoder:
    """Fake speaker encoder: 'speaker' = whether the dominant frequency is above 300 Hz."""

    def embed(self, x16k: np.ndarray) -> np.ndarray:
        spectrum = np.abs(np.fft.rfft(x16k))
        peak_hz = np.argmax(spectrum) * SR / len(x16k)
        return np.array([1.0, 0.0] if peak_hz < 300 else [0.0, 1.0], np.float32)


def tone(hz: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def reference(x: np.ndarray, **kwargs: Any) -> ReferenceAudio:
    defaults: dict[str, Any] = dict(
        speech_seconds=len(x) / SR, original_seconds=len(x) / SR, snr_db=30.0, clipping=0.0
    )
    defaults.update(kwargs)
    return ReferenceAudio(samples16k=x, **defaults)


def test_one_voice_is_consistent_and_two_voices_are_not() -> None:
    encoder = cast(Any, PitchEncoder())
    assert speaker_consistency(encoder, tone(200, 9.0)) == 1.0
    mixed = np.concatenate([tone(200, 6.0), tone(500, 6.0)])
    assert speaker_consistency(encoder, mixed) == 0.0
    assert speaker_consistency(encoder, tone(200, 4.0)) is None  # too short to judge


def test_warnings_name_several_speakers_clipping_and_keep_the_reference_ones() -> None:
    x = tone(200, 9.0)
    clean = reference_warnings(reference(x), 0.9)
    assert clean == []
    noisy = reference(x, clipping=0.005, warnings=["noisy reference: SNR 17 dB"])
    warnings = reference_warnings(noisy, 0.3)
    assert warnings[0].startswith("noisy reference")
    assert any(w.startswith("clipping") for w in warnings)
    assert any("several speakers" in w for w in warnings)
