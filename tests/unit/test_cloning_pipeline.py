"""Pooling several references into one voice print (duration-weighted)."""

from __future__ import annotations

import numpy as np
import pytest

from voxclone.synth.audio.reference import ReferenceAudio, combine_references
from voxclone.synth.voice.pipeline import VoicePrint, pool_prints
from voxclone.synth.voice.prosody import PitchStats


def _print(direction: int, seconds: float, pitch_hz: float, level_db: float) -> VoicePrint:
    embedding = np.zeros(256, np.float32)
    embedding[direction] = 1.0
    return VoicePrint(
        embedding=embedding,
        pitch=PitchStats(pitch_hz, pitch_hz / 2, pitch_hz * 2, 0.5),
        spectrum=np.full(8, level_db, np.float32),
        speech_seconds=seconds,
        clips=1,
    )


def test_pooling_weights_by_speech_seconds() -> None:
    a, b = _print(0, 9.0, 100.0, 0.0), _print(1, 3.0, 200.0, 4.0)
    pooled = pool_prints([a, b])
    assert pooled.clips == 2 and pooled.speech_seconds == pytest.approx(12.0)
    # Embedding: 3:1 mix, re-normalized.
    expected = np.zeros(256)
    expected[0], expected[1] = 0.75, 0.25
    expected /= np.linalg.norm(expected)
    assert np.allclose(pooled.embedding, expected, atol=1e-6)
    assert float(np.linalg.norm(pooled.embedding)) == pytest.approx(1.0, abs=1e-6)
    # Pitch: averaged in octaves, 3/4 of the way to 100 Hz.
    assert pooled.pitch.median_hz == pytest.approx(2 ** (0.75 * np.log2(100) + 0.25 * np.log2(200)))
    assert pooled.pitch.low_hz == pytest.approx(pooled.pitch.median_hz / 2)
    assert pooled.spectrum is not None and np.allclose(pooled.spectrum, 1.0)


def test_pooling_ignores_unvoiced_and_missing_spectra() -> None:
    voiced = _print(0, 2.0, 150.0, 0.0)
    silent = VoicePrint(
        embedding=voiced.embedding,
        pitch=PitchStats(0.0, 0.0, 0.0, 0.0),
        spectrum=None,
        speech_seconds=6.0,
        clips=1,
    )
    pooled = pool_prints([voiced, silent])
    assert pooled.pitch.median_hz == pytest.approx(150.0)
    assert pooled.spectrum is not None and np.allclose(pooled.spectrum, 0.0)
    assert pool_prints([voiced]) is voiced
    with pytest.raises(ValueError):
        pool_prints([])


def test_combined_references_name_each_recordings_warnings() -> None:
    def ref(seconds: float, snr: float, warnings: list[str]) -> ReferenceAudio:
        return ReferenceAudio(
            samples16k=np.zeros(int(seconds * 16_000), np.float32),
            speech_seconds=seconds,
            original_seconds=seconds + 1,
            snr_db=snr,
            clipping=0.0,
            warnings=warnings,
        )

    combined = combine_references([ref(2.0, 30.0, []), ref(4.0, 12.0, ["noisy"])])
    assert combined.speech_seconds == pytest.approx(6.0)
    assert combined.snr_db == 12.0
    assert combined.samples16k.size == 6 * 16_000
    assert combined.warnings == ["recording 2: noisy"]
