"""Recording-tone match: spectra, curves and the equalizer, on generated signals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import butter, sosfilt

from voxclone.synth.audio.tone import (
    GRID_HZ,
    MAX_GAIN_DB,
    TRUSTED_BAND_HZ,
    ToneFilter,
    long_term_spectrum,
    match_curve,
    tone_filter_for,
)

RATE = 24_000


def noise(seconds: float, rate: int = RATE, seed: int = 0) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(int(seconds * rate))).astype(
        np.float32
    )


def lowpassed(x: np.ndarray, cutoff_hz: float, rate: int) -> np.ndarray:
    sos = butter(2, cutoff_hz, btype="low", fs=rate, output="sos")
    return sosfilt(sos, x).astype(np.float32)


def in_band(lo: float, hi: float) -> np.ndarray:
    grid = GRID_HZ
    return (grid >= lo) & (grid <= hi)


def test_white_noise_has_a_flat_long_term_spectrum() -> None:
    spectrum = long_term_spectrum(noise(4.0), RATE)
    assert spectrum is not None and spectrum.shape == GRID_HZ.shape
    band = in_band(150, 7000)
    assert float(np.ptp(spectrum[band])) < 3.0


def test_a_low_pass_shows_as_a_falling_spectrum() -> None:
    spectrum = long_term_spectrum(lowpassed(noise(4.0), 1000, RATE), RATE)
    assert spectrum is not None
    at = dict(zip(GRID_HZ.round(), spectrum, strict=True))
    low = np.mean([v for f, v in at.items() if 200 <= f <= 500])
    high = np.mean([v for f, v in at.items() if 4000 <= f <= 6000])
    assert low - high > 25.0


def test_too_little_or_silent_audio_is_not_measured() -> None:
    assert long_term_spectrum(noise(0.1), RATE) is None
    assert long_term_spectrum(np.zeros(RATE * 3, np.float32), RATE) is None


def test_identical_spectra_need_no_correction() -> None:
    spectrum = long_term_spectrum(noise(3.0, seed=1), RATE)
    assert spectrum is not None
    assert np.allclose(match_curve(spectrum, spectrum), 0.0, atol=1e-5)


def test_curve_is_clamped_and_held_flat_outside_the_trusted_band() -> None:
    reference = np.where(GRID_HZ > 2000, -40.0, 0.0).astype(np.float32)
    voice = np.zeros_like(reference)
    gain = match_curve(reference, voice)
    assert float(gain.max()) <= MAX_GAIN_DB + 1e-6
    assert float(gain.min()) >= -MAX_GAIN_DB - 1e-6
    grid = GRID_HZ
    above = grid > TRUSTED_BAND_HZ[1]
    below = grid < TRUSTED_BAND_HZ[0]
    assert np.ptp(gain[above]) < 1e-6 and np.ptp(gain[below]) < 1e-6


def test_curves_must_live_on_the_grid() -> None:
    with pytest.raises(ValueError):
        match_curve(np.zeros(10), np.zeros(10))
    with pytest.raises(ValueError):
        ToneFilter(np.zeros(10))
    with pytest.raises(ValueError):
        ToneFilter(np.full(GRID_HZ.shape, np.nan))


def test_equalizer_moves_a_voice_onto_the_reference_tone() -> None:
    # A "reference" recorded through a dull channel (16 kHz, as references are
    # analysed) and a bright "voice" at the engine rate.
    reference = lowpassed(noise(4.0, 16_000, seed=2), 1500, 16_000)
    voice = noise(4.0, seed=3)
    reference_db = long_term_spectrum(reference, 16_000)
    assert reference_db is not None
    tone = tone_filter_for(reference_db, voice, RATE)
    assert tone is not None
    shaped = tone.apply(voice, RATE)
    before = long_term_spectrum(voice, RATE)
    after = long_term_spectrum(shaped, RATE)
    assert before is not None and after is not None
    band = in_band(*TRUSTED_BAND_HZ)
    # Only the part of the gap the clamp allows can be closed.
    target = np.clip(reference_db - before, -MAX_GAIN_DB, MAX_GAIN_DB) + before
    error_before = float(np.mean(np.abs(before[band] - target[band])))
    error_after = float(np.mean(np.abs(after[band] - target[band])))
    assert error_after < 0.3 * error_before
    assert error_after < 2.0


def test_equalizer_keeps_length_and_loudness() -> None:
    voice = noise(2.0, seed=4)
    gain = np.linspace(-6, 6, GRID_HZ.size).astype(np.float32)
    shaped = ToneFilter(gain).apply(voice, RATE)
    assert shaped.shape == voice.shape and shaped.dtype == np.float32
    rms = float(np.sqrt(np.mean(voice**2)))
    assert float(np.sqrt(np.mean(shaped**2))) == pytest.approx(rms, rel=1e-3)
    assert ToneFilter(gain).apply(np.zeros(0, np.float32), RATE).size == 0


@pytest.mark.parametrize("rate", [16_000, 22_050, 24_000, 48_000])
def test_flat_curve_is_transparent_at_any_rate(rate: int) -> None:
    voice = noise(1.0, rate, seed=5)
    shaped = ToneFilter(np.zeros(GRID_HZ.shape, np.float32)).apply(voice, rate)
    inner = slice(rate // 10, -rate // 10)  # away from the filter's edge ramps
    assert np.allclose(shaped[inner], voice[inner], atol=0.01)


def test_no_reference_spectrum_means_no_filter() -> None:
    assert tone_filter_for(None, noise(2.0), RATE) is None
    reference_db = long_term_spectrum(noise(2.0, seed=6), RATE)
    assert tone_filter_for(reference_db, noise(0.05), RATE) is None
