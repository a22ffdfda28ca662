"""The CAM++ listener's Kaldi filterbank front end (synth/voice/fbank.py)."""

from __future__ import annotations

import numpy as np
import pytest

from voxclone.synth.voice import fbank

RATE = fbank.SAMPLE_RATE


def _tone(hz: float, seconds: float = 1.0, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def test_frames_fit_wholly_inside_the_clip() -> None:
    for n, frames in ((399, 0), (400, 1), (559, 1), (560, 2), (16_000, 98)):
        assert fbank.log_fbank(np.zeros(n, dtype=np.float32) + 0.1).shape == (frames, 80)


@pytest.mark.parametrize("band", [25, 40, 62])
def test_a_pure_tone_peaks_in_the_filter_centred_on_it(band: int) -> None:
    hz = float(fbank.mel_centres_hz()[band])
    feats = fbank.log_fbank(_tone(hz))
    assert int(np.argmax(feats.mean(axis=0))) == band


def test_the_filters_are_kaldi_triangles() -> None:
    filters = fbank.mel_filters()
    assert filters.shape == (80, 257)
    assert not filters[:, -1].any()  # the Nyquist bin carries no weight
    assert filters.max() <= 1.0
    # The first filter starts above 20 Hz, the last ends at or below Nyquist.
    bin_hz = np.arange(257) * RATE / fbank.N_FFT
    assert bin_hz[np.nonzero(filters[0])[0][0]] > fbank.LOW_FREQ
    # Neighbouring triangles overlap: every bin between the first and last
    # centre is covered by at least one filter.
    centres = fbank.mel_centres_hz()
    inside = (bin_hz > centres[0]) & (bin_hz < centres[-1])
    assert (filters[:, inside].sum(axis=0) > 0).all()


def test_a_constant_signal_has_only_the_log_floor() -> None:
    # Each frame's DC offset is removed first, so nothing is left.
    feats = fbank.log_fbank(np.full(4000, 0.25, dtype=np.float32))
    np.testing.assert_allclose(feats, np.log(fbank.LOG_FLOOR), rtol=0, atol=1e-5)


def test_gain_shifts_log_energies_and_vanishes_after_mean_normalization() -> None:
    x = _tone(440) + _tone(1900, amplitude=0.2)
    a, b = fbank.log_fbank(x), fbank.log_fbank(0.25 * x)
    loud = a > np.log(fbank.LOG_FLOOR) + 8  # well above the floor
    np.testing.assert_allclose((a - b)[loud], 2 * np.log(4.0), atol=1e-4)
    na, nb = fbank.mean_normalized_fbank(x), fbank.mean_normalized_fbank(0.25 * x)
    np.testing.assert_allclose(na[:, loud.all(axis=0)], nb[:, loud.all(axis=0)], atol=1e-4)
    np.testing.assert_allclose(na.mean(axis=0), 0, atol=1e-4)


def test_matches_kaldi_reference_values() -> None:
    """Values from kaldi-native-fbank 1.23 (dither 0, 80 bins, other options at
    Kaldi's defaults) on this signal: an independent C++ implementation."""
    t = np.arange(4000) / RATE
    x = (
        0.3 * np.sin(2 * np.pi * 220 * t)
        + 0.1 * np.sin(2 * np.pi * 3100 * t + 0.5)
        + 0.05 * np.sin(2 * np.pi * (500 + 4000 * t) * t)
    ).astype(np.float32)
    feats = fbank.log_fbank(x)
    assert feats.shape == (23, 80)
    bins = [0, 9, 20, 45, 62, 79]
    expected = {
        0: [-6.0613, -2.0089, -1.5366, -13.3975, -14.9518, -15.9424],
        11: [-7.4051, -2.0070, -14.9304, -13.2306, -14.9513, -15.9424],
        22: [-6.9507, -2.0080, -15.1472, 1.7074, -14.9491, -15.9424],
    }
    for frame, values in expected.items():
        np.testing.assert_allclose(feats[frame, bins], values, atol=5e-3)


def test_silence_and_short_input() -> None:
    assert fbank.log_fbank(np.zeros(0, dtype=np.float32)).shape == (0, 80)
    assert fbank.mean_normalized_fbank(np.zeros(100, dtype=np.float32)).shape == (0, 80)
