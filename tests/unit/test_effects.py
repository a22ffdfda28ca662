"""DSP behind the user controls: pitch, energy, limiter, whisper, F0 range, loudness."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import signal

from voxclone.errors import InvalidInput
from voxclone.synth.audio.effects import (
    _oversampled_abs,
    apply_energy,
    loudness_lufs,
    measure_f0,
    median_f0,
    pitch_shift,
    scale_f0_range,
    true_peak_dbfs,
    true_peak_limit,
    whisperize,
)

SR = 24000


def voiced_signal(seconds: float = 1.5, f0_hz: float = 150.0, sr: int = SR) -> np.ndarray:
    """Sawtooth-like harmonic series with 5 Hz vibrato and 50 ms fades, peak 0.4."""
    t = np.arange(int(seconds * sr)) / sr
    f0 = f0_hz * (1.0 + 0.03 * np.sin(2 * np.pi * 5.0 * t))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    top = int(sr / 2 / (f0_hz * 1.1))
    y = sum(np.sin(k * phase) / k for k in range(1, top))
    envelope = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.05)
    y = y * envelope
    return (0.4 * y / np.max(np.abs(y))).astype(np.float32)


@pytest.fixture(scope="module")
def voice() -> np.ndarray:
    return voiced_signal()


@pytest.fixture(scope="module")
def voice_f0(voice: np.ndarray) -> float:
    return median_f0(voice, SR)


def independent_true_peak(x: np.ndarray) -> float:
    """4x oversampled peak by FFT interpolation (not the module's polyphase path)."""
    return float(np.max(np.abs(signal.resample(x.astype(np.float64), 4 * len(x)))))


# ------------------------------------------------------------------ F0


def test_median_f0_of_a_known_tone(voice_f0: float) -> None:
    assert voice_f0 == pytest.approx(150.0, rel=0.03)


def test_silence_has_no_f0() -> None:
    assert median_f0(np.zeros(SR, dtype=np.float32), SR) == 0.0
    assert measure_f0(np.zeros(0, dtype=np.float32), SR).size == 0


# ------------------------------------------------------------------ pitch


@pytest.mark.parametrize("method", ["world", "psola"])
@pytest.mark.parametrize("octaves", [-0.5, -0.25, 0.25, 0.5])
def test_pitch_shift_moves_f0_and_keeps_duration(
    voice: np.ndarray, voice_f0: float, method: str, octaves: float
) -> None:
    shifted = pitch_shift(voice, SR, octaves, method=method)  # type: ignore[arg-type]
    assert len(shifted) == len(voice)
    ratio = median_f0(shifted, SR) / voice_f0
    assert ratio == pytest.approx(2.0**octaves, rel=0.15)
    # Level stays in the same ballpark (no silent or blown-up output).
    level_change = np.sqrt(np.mean(shifted**2)) / np.sqrt(np.mean(voice**2))
    assert 0.5 < level_change < 2.0


def test_pitch_zero_is_identity(voice: np.ndarray) -> None:
    np.testing.assert_array_equal(pitch_shift(voice, SR, 0.0), voice)


@pytest.mark.parametrize("octaves", [-0.6, 0.51, float("nan")])
def test_pitch_out_of_range_is_rejected(voice: np.ndarray, octaves: float) -> None:
    with pytest.raises(InvalidInput) as err:
        pitch_shift(voice, SR, octaves)
    assert err.value.field == "pitch"
    assert err.value.limit == [-0.5, 0.5]


# ------------------------------------------------------------------ energy


def high_to_low_band_ratio(x: np.ndarray) -> float:
    freqs, power = signal.welch(x, SR, nperseg=1024)
    return float(power[freqs > 2500].sum() / power[(freqs > 100) & (freqs < 1000)].sum())


def test_energy_loudness_and_brightness_increase_monotonically(voice: np.ndarray) -> None:
    energies = [0.8, 0.9, 1.0, 1.1, 1.2]
    outputs = [apply_energy(voice, SR, e) for e in energies]
    loudness = [loudness_lufs(y, SR) for y in outputs]
    assert all(b > a for a, b in zip(loudness, loudness[1:], strict=False)), loudness
    # About ±3 dB gain plus the shelf: a clear but not extreme spread.
    assert 5.0 < loudness[-1] - loudness[0] < 12.0
    tilt = [high_to_low_band_ratio(y) for y in outputs]
    assert all(b > a for a, b in zip(tilt, tilt[1:], strict=False)), tilt
    np.testing.assert_array_equal(outputs[2], voice)


def test_energy_out_of_range_is_rejected(voice: np.ndarray) -> None:
    with pytest.raises(InvalidInput) as err:
        apply_energy(voice, SR, 1.5)
    assert err.value.field == "energy"


# ------------------------------------------------------------------ limiter


def test_limiter_holds_true_peak_under_ceiling_for_hot_input() -> None:
    voice = voiced_signal(1.0)
    # A quiet passage, then the voice, then a quarter-rate sine whose samples
    # miss its crests (the classic inter-sample peak); driven to +6 dBFS true peak.
    n = np.arange(SR // 2)
    intersample = np.sin(np.pi / 2 * n + np.pi / 4)
    quiet = 0.05 * voiced_signal(0.5)
    hot = np.concatenate([quiet, voice, intersample]).astype(np.float32)
    hot *= 10 ** (6 / 20) / independent_true_peak(hot)
    assert true_peak_dbfs(hot) > 5.5

    limited = true_peak_limit(hot, SR, ceiling_dbfs=-1.0)
    assert len(limited) == len(hot)
    assert 20 * np.log10(independent_true_peak(limited)) <= -1.0 + 0.02
    assert true_peak_dbfs(limited) <= -1.0
    # Look-ahead gain, not clipping: the quiet passage before the loud part is untouched
    # and the loud part keeps its shape.
    untouched = len(quiet) - int(0.1 * SR)
    np.testing.assert_allclose(limited[:untouched], hot[:untouched], atol=1e-6)
    loud = slice(len(quiet), len(quiet) + len(voice))
    assert np.corrcoef(limited[loud], hot[loud])[0, 1] > 0.99
    # A clipper would leave flat tops at the ceiling; the limiter does not.
    at_ceiling = np.abs(limited) >= 0.999 * np.max(np.abs(limited))
    assert at_ceiling.sum() < 0.001 * len(limited)


def test_limiter_leaves_quiet_audio_alone(voice: np.ndarray) -> None:
    np.testing.assert_allclose(true_peak_limit(voice * 0.5, SR), voice * 0.5, atol=1e-7)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 41, 81, 1000, SR])
def test_limiter_oversampling_equals_scipy_resample_poly(n: int) -> None:
    # The limiter's numpy polyphase path replaced resample_poly (scipy.signal cost
    # seconds of every start); same taps and alignment, so the same peaks.
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    expected = np.abs(signal.resample_poly(x.astype(np.float64), 4, 1))
    np.testing.assert_allclose(_oversampled_abs(x), expected, rtol=0, atol=1e-12)


# ------------------------------------------------------------------ WORLD effects


def test_whisperize_removes_voicing_and_keeps_level(voice: np.ndarray) -> None:
    whispered = whisperize(voice, SR)
    assert len(whispered) == len(voice)
    voiced_before = measure_f0(voice, SR).size
    voiced_after = measure_f0(whispered, SR).size
    assert voiced_after < 0.2 * voiced_before
    assert np.sqrt(np.mean(whispered**2)) == pytest.approx(np.sqrt(np.mean(voice**2)), rel=0.1)


@pytest.mark.parametrize(("factor", "low", "high"), [(2.0, 1.5, 2.5), (0.5, 0.3, 0.8)])
def test_scale_f0_range_scales_intonation_around_median(
    voice: np.ndarray, voice_f0: float, factor: float, low: float, high: float
) -> None:
    scaled = scale_f0_range(voice, SR, factor)
    before, after = np.log(measure_f0(voice, SR)), np.log(measure_f0(scaled, SR))
    assert low < after.std() / before.std() < high
    assert np.exp(np.median(after)) == pytest.approx(voice_f0, rel=0.05)


# ------------------------------------------------------------------ loudness


@pytest.mark.parametrize("sr", [16000, 24000, 48000])
def test_loudness_of_reference_sine(sr: int) -> None:
    # BS.1770: a 997 Hz sine at -20 dBFS peak in one channel reads -23.0 LUFS.
    t = np.arange(2 * sr) / sr
    sine = (0.1 * np.sin(2 * np.pi * 997 * t)).astype(np.float32)
    assert loudness_lufs(sine, sr) == pytest.approx(-23.0, abs=0.1)
    assert loudness_lufs(sine * 0.5, sr) == pytest.approx(-29.02, abs=0.1)


def test_loudness_of_silence_is_minus_infinity() -> None:
    assert loudness_lufs(np.zeros(SR, dtype=np.float32), SR) == float("-inf")
