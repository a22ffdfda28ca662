"""Measurements of a reference clip: SNR, clipping, loudness (ITU-R BS.1770)."""

from __future__ import annotations

import math

import numpy as np

Segment = tuple[int, int]

SNR_CEILING_DB = 100.0  # reported for digitally silent backgrounds
_FRAME_S = 0.02
_EPS = 1e-12
# Below this much non-speech, the speech/non-speech split is not trusted.
_MIN_NOISE_S = 0.3


def frame_powers(x: np.ndarray, sr: int, frame_s: float = _FRAME_S) -> np.ndarray:
    """Mean square per non-overlapping frame (a trailing partial frame is dropped)."""
    size = max(1, round(frame_s * sr))
    count = x.shape[0] // size
    if count == 0:
        return np.array([float(np.mean(np.square(x, dtype=np.float64)))]) if x.size else np.zeros(0)
    frames = np.asarray(x[: count * size], dtype=np.float64).reshape(count, size)
    return np.mean(np.square(frames), axis=1)


def speech_frame_mask(segments: list[Segment], n_frames: int, frame_len: int) -> np.ndarray:
    """True for frames whose centre lies in a speech segment."""
    centres = np.arange(n_frames) * frame_len + frame_len // 2
    mask = np.zeros(n_frames, dtype=bool)
    for start, end in segments:
        mask |= (centres >= start) & (centres < end)
    return mask


_NOISE_PERCENTILE = 20
_DIGITAL_SILENCE_POWER = 1e-10  # about -100 dBFS


def estimate_snr_db(x: np.ndarray, sr: int, segments: list[Segment]) -> float:
    """Signal-to-noise ratio in dB; ``segments`` are speech intervals in ``x``'s samples.

    With enough non-speech (>= 0.3 s), noise power is the median frame power
    outside speech (the median ignores a stray click or breath the VAD left
    out) and speech power is the mean inside speech minus that noise.

    Without it (a clip that is speech wall to wall), the noise floor is taken
    from the quietest 10 % of 20 ms frames: speech has closures and gaps
    between words where only the background remains. Those frames still hold
    some speech, so this estimate errs low, i.e. towards caution.
    """
    powers = frame_powers(x, sr)
    if powers.size == 0:
        return 0.0
    frame_len = max(1, round(_FRAME_S * sr))
    speech = speech_frame_mask(segments, powers.size, frame_len)
    if not speech.any():
        return 0.0
    speech_power = float(np.mean(powers[speech]))
    # Digital silence (edited gaps) is not background noise: leave it out.
    non_speech = powers[~speech]
    non_speech = non_speech[non_speech > _DIGITAL_SILENCE_POWER]
    if non_speech.size * _FRAME_S >= _MIN_NOISE_S:
        # A low percentile, not the median: the VAD misses quiet or very
        # high-pitched speech, and those frames would pass for "noise" (a clean
        # 440 Hz voice measured 2.5 dB with the median, ~30 dB this way).
        # Stationary noise has nearly the same power in every frame, so this
        # lowers a true noise estimate by well under a dB.
        noise_power = float(np.percentile(non_speech, _NOISE_PERCENTILE))
    else:
        noise_power = float(np.percentile(powers, 10))
    return _ratio_db(speech_power - noise_power, noise_power)


def _ratio_db(signal_power: float, noise_power: float) -> float:
    if signal_power <= 0:
        return 0.0
    if noise_power <= _EPS * max(signal_power, _EPS):
        return SNR_CEILING_DB
    return float(min(SNR_CEILING_DB, 10.0 * math.log10(signal_power / noise_power)))


def clipping_ratio(x: np.ndarray, *, min_run: int = 3, tolerance: float = 0.001) -> float:
    """Fraction of samples that sit on clipped plateaus.

    A sample counts when it lies within ``tolerance`` (relative) of the clip's
    own peak and belongs to a run of at least ``min_run`` such samples in a
    row. The level is the peak rather than full scale because browsers and
    editors often clip first and reduce gain afterwards, leaving flat tops
    below 1.0. Natural peaks are single samples or pairs, so runs of three
    are a reliable sign. Clips whose peak is below 0.1 are not examined:
    there, quantisation makes short flat runs normal.
    """
    a = np.abs(np.asarray(x, dtype=np.float32))
    if a.size == 0:
        return 0.0
    peak = float(a.max())
    if peak < 0.1:
        return 0.0
    hot = a >= peak * (1.0 - tolerance)
    return _samples_in_long_runs(hot, min_run) / a.size


def _samples_in_long_runs(flags: np.ndarray, min_run: int) -> int:
    padded = np.concatenate(([False], flags, [False])).astype(np.int8)
    edges = np.diff(padded)
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    lengths = ends - starts
    return int(lengths[lengths >= min_run].sum())


# --------------------------------------------------------------------------- loudness

# Analog prototypes of the two K-weighting stages in ITU-R BS.1770. The
# standard lists coefficients for 48 kHz only; designing from these values
# gives the same filters at any sample rate.
_SHELF_HZ = 1681.974450955533
_SHELF_GAIN_DB = 3.999843853973347
_SHELF_Q = 0.7071752369554196
_HIGHPASS_HZ = 38.13547087602444
_HIGHPASS_Q = 0.5003270373238773
_BLOCK_S = 0.4
_BLOCK_HOP_S = 0.1  # 75 % overlap
_ABSOLUTE_GATE_LUFS = -70.0
_RELATIVE_GATE_LU = -10.0


def _k_weighting(sr: int) -> list[tuple[np.ndarray, np.ndarray]]:
    k = math.tan(math.pi * _SHELF_HZ / sr)
    vh = 10.0 ** (_SHELF_GAIN_DB / 20.0)
    vb = vh**0.4996667741545416
    a0 = 1.0 + k / _SHELF_Q + k * k
    shelf_b = (
        np.array(
            [vh + vb * k / _SHELF_Q + k * k, 2.0 * (k * k - vh), vh - vb * k / _SHELF_Q + k * k]
        )
        / a0
    )
    shelf_a = np.array([1.0, 2.0 * (k * k - 1.0) / a0, (1.0 - k / _SHELF_Q + k * k) / a0])

    k = math.tan(math.pi * _HIGHPASS_HZ / sr)
    a0 = 1.0 + k / _HIGHPASS_Q + k * k
    hp_b = np.array([1.0, -2.0, 1.0])
    hp_a = np.array([1.0, 2.0 * (k * k - 1.0) / a0, (1.0 - k / _HIGHPASS_Q + k * k) / a0])
    return [(shelf_b, shelf_a), (hp_b, hp_a)]


def integrated_loudness(x: np.ndarray, sr: int) -> float:
    """Gated integrated loudness of mono audio in LUFS; -inf for silence."""
    # Imported on use: scipy.signal cost ~0.8-2.4 s of every start (python -X importtime),
    # and only references (cloning) are measured (tests/integration/test_import_cost.py).
    from scipy.signal import lfilter

    y = np.asarray(x, dtype=np.float64)
    for b, a in _k_weighting(sr):
        y = lfilter(b, a, y)
    block = round(_BLOCK_S * sr)
    hop = round(_BLOCK_HOP_S * sr)
    if y.shape[0] < block:
        # Shorter than one gating block: measure the clip as a single block.
        powers = np.array([np.mean(np.square(y))]) if y.size else np.zeros(0)
    else:
        squares = np.concatenate(([0.0], np.cumsum(np.square(y))))
        starts = np.arange(0, y.shape[0] - block + 1, hop)
        powers = (squares[starts + block] - squares[starts]) / block
    powers = powers[_lufs(powers) > _ABSOLUTE_GATE_LUFS]
    if powers.size == 0:
        return -math.inf
    relative_gate = float(_lufs(np.array([powers.mean()]))[0]) + _RELATIVE_GATE_LU
    powers = powers[_lufs(powers) > relative_gate]
    return float(_lufs(np.array([powers.mean()]))[0])


def _lufs(powers: np.ndarray) -> np.ndarray:
    return -0.691 + 10.0 * np.log10(np.maximum(powers, _EPS * _EPS))


def loudness_normalize(
    x: np.ndarray, sr: int, target_lufs: float = -23.0, *, peak_ceiling_db: float = -1.0
) -> np.ndarray:
    """Scale to ``target_lufs`` integrated loudness, never past the peak ceiling.

    When the gain would push a sample above ``peak_ceiling_db`` dBFS, the gain
    is reduced instead (the result is quieter than the target): a limiter
    would change the waveform, and this audio is a voice reference.
    Silence is returned unchanged.
    """
    samples = np.asarray(x, dtype=np.float32)
    loudness = integrated_loudness(samples, sr)
    if not math.isfinite(loudness):
        return samples.copy()
    gain = 10.0 ** ((target_lufs - loudness) / 20.0)
    peak = float(np.max(np.abs(samples)))
    ceiling = 10.0 ** (peak_ceiling_db / 20.0)
    if peak * gain > ceiling:
        gain = ceiling / peak
    return (samples * gain).astype(np.float32)
