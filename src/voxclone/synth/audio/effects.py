"""DSP behind the user controls (pitch, energy, emotion presets) and the output limiter.

All functions take and return mono float32 arrays and never change the length.
Product-wide ranges are enforced here so every surface rejects the same values.

WORLD (``pyworld``) is used where we must edit pitch without moving formants:
it splits speech into F0, a spectral envelope and aperiodicity, so F0 can be
changed while the envelope (the vocal tract) stays put. Its F0 estimator is
``dio`` + ``stonemask`` by default (about 50x faster than ``harvest``);
``measure_f0`` uses ``harvest`` because it is the more accurate judge.
"""

from __future__ import annotations

import warnings
from functools import cache
from typing import Any, Literal

import numpy as np

from voxclone.errors import InvalidInput
from voxclone.synth.audio.quality import integrated_loudness

PITCH_OCTAVES_RANGE = (-0.5, 0.5)
ENERGY_RANGE = (0.8, 1.2)
F0_RANGE_FACTOR_RANGE = (0.25, 2.0)

PitchMethod = Literal["world", "psola"]
F0Method = Literal["dio", "harvest"]

_F0_FLOOR_HZ = 60.0
_F0_CEIL_HZ = 800.0
_FRAME_PERIOD_MS = 5.0
_DIO_ALLOWED_RANGE = 0.3

# Energy: ±3 dB of broadband gain plus ±3 dB of high shelf across 0.8–1.2. Louder
# voices are not just louder, they are brighter (more high-frequency energy).
_ENERGY_DB_PER_UNIT = 15.0
_ENERGY_SHELF_HZ = 1500.0

# Limiter timing: look-ahead long enough for a smooth attack, release slow enough
# not to pump on syllables.
_LIMITER_LOOKAHEAD_MS = 5.0
_LIMITER_RELEASE_MS = 60.0
_LIMITER_OVERSAMPLE = 4
_LIMITER_MARGIN_DB = 0.05
_LIMITER_MAX_PASSES = 4


def _check_range(name: str, value: float, bounds: tuple[float, float]) -> None:
    low, high = bounds
    if not (low <= value <= high) or not np.isfinite(value):
        raise InvalidInput(
            f"{name} must be between {low} and {high}; got {value}.",
            field=name,
            limit=[low, high],
            value=value,
        )


def _as_float32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32).reshape(-1))


def _fit_length(y: np.ndarray, n: int) -> np.ndarray:
    """Trim or zero-pad ``y`` to ``n`` samples (WORLD rounds to whole frames)."""
    if len(y) >= n:
        return np.asarray(y[:n], dtype=np.float32)
    return np.concatenate([y, np.zeros(n - len(y))]).astype(np.float32)


# --------------------------------------------------------------------------- F0


def _world() -> Any:
    # Imported on use: pyworld (with the pkg_resources it pulls in) cost ~0.1-0.15 s
    # of every start (`python -X importtime`), and only pitch/F0-range/whisper need it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyworld imports pkg_resources
        import pyworld
    return pyworld


def _estimate_f0(x64: np.ndarray, sr: int, method: F0Method) -> tuple[np.ndarray, np.ndarray]:
    pyworld = _world()
    if method == "harvest":
        return pyworld.harvest(
            x64, sr, f0_floor=_F0_FLOOR_HZ, f0_ceil=_F0_CEIL_HZ, frame_period=_FRAME_PERIOD_MS
        )
    # allowed_range 0.3 (default 0.1): with the default, dio left about 20 % of the
    # frames harvest hears as voiced unvoiced, and a pitch shift left those frames at
    # the old pitch (−0.5 octave measured as −0.40 on Kokoro speech; now −0.46…−0.51).
    f0, times = pyworld.dio(
        x64,
        sr,
        f0_floor=_F0_FLOOR_HZ,
        f0_ceil=_F0_CEIL_HZ,
        frame_period=_FRAME_PERIOD_MS,
        allowed_range=_DIO_ALLOWED_RANGE,
    )
    return pyworld.stonemask(x64, f0, times, sr), times


def measure_f0(x: np.ndarray, sr: int, *, method: F0Method = "harvest") -> np.ndarray:
    """F0 in Hz of the voiced frames (5 ms hop); empty when nothing is voiced."""
    samples = _as_float32(x)
    if samples.size == 0:
        return np.zeros(0)
    f0, _ = _estimate_f0(samples.astype(np.float64), sr, method)
    return np.asarray(f0[f0 > 0])


def median_f0(x: np.ndarray, sr: int, *, method: F0Method = "harvest") -> float:
    """Median voiced F0 in Hz, or 0.0 when no frame is voiced (silence, whisper)."""
    voiced = measure_f0(x, sr, method=method)
    return float(np.median(voiced)) if voiced.size else 0.0


# --------------------------------------------------------------------------- WORLD


class _WorldParams:
    """WORLD decomposition of a signal: F0 track, spectral envelope, aperiodicity."""

    def __init__(self, x: np.ndarray, sr: int, f0_method: F0Method = "dio") -> None:
        x64 = x.astype(np.float64)
        self.sr = sr
        self.length = len(x)
        self.f0, times = _estimate_f0(x64, sr, f0_method)
        pyworld = _world()
        self.envelope = pyworld.cheaptrick(x64, self.f0, times, sr)
        self.aperiodicity = pyworld.d4c(x64, self.f0, times, sr)

    def synthesize(self, f0: np.ndarray, aperiodicity: np.ndarray | None = None) -> np.ndarray:
        ap = self.aperiodicity if aperiodicity is None else aperiodicity
        y = _world().synthesize(
            np.ascontiguousarray(f0, dtype=np.float64),
            self.envelope,
            np.ascontiguousarray(ap, dtype=np.float64),
            self.sr,
            _FRAME_PERIOD_MS,
        )
        return _fit_length(y, self.length)


def _too_short_for_world(x: np.ndarray, sr: int) -> bool:
    # WORLD needs a few analysis frames; shorter clips pass through unchanged.
    return len(x) < int(0.05 * sr)


def scale_f0_range(x: np.ndarray, sr: int, factor: float) -> np.ndarray:
    """Expand (factor > 1) or compress (< 1) intonation around the median F0, in log-F0."""
    _check_range("f0_range", factor, F0_RANGE_FACTOR_RANGE)
    samples = _as_float32(x)
    if factor == 1.0 or _too_short_for_world(samples, sr):
        return samples.copy()
    world = _WorldParams(samples, sr)
    voiced = world.f0 > 0
    if not voiced.any():
        return samples.copy()
    center = np.median(world.f0[voiced])
    new_f0 = world.f0.copy()
    new_f0[voiced] = center * (world.f0[voiced] / center) ** factor
    new_f0[voiced] = np.clip(new_f0[voiced], _F0_FLOOR_HZ, _F0_CEIL_HZ)
    return world.synthesize(new_f0)


def whisperize(x: np.ndarray, sr: int) -> np.ndarray:
    """Whisper: resynthesize with no voicing (F0 = 0, aperiodicity = 1), same RMS."""
    samples = _as_float32(x)
    if _too_short_for_world(samples, sr):
        return samples.copy()
    world = _WorldParams(samples, sr)
    y = world.synthesize(np.zeros_like(world.f0), np.ones_like(world.aperiodicity))
    return _match_rms(y, samples)


def _match_rms(y: np.ndarray, reference: np.ndarray) -> np.ndarray:
    rms_y = float(np.sqrt(np.mean(np.square(y, dtype=np.float64))))
    rms_ref = float(np.sqrt(np.mean(np.square(reference, dtype=np.float64))))
    if rms_y < 1e-9:
        return y.astype(np.float32)
    return (y * (rms_ref / rms_y)).astype(np.float32)


# --------------------------------------------------------------------------- pitch


def pitch_shift(
    x: np.ndarray, sr: int, octaves: float, *, method: PitchMethod = "world"
) -> np.ndarray:
    """Shift pitch by ``octaves`` (−0.5…+0.5) keeping duration and formants.

    ``world``: resynthesis with F0 × 2**octaves (cleanest on large shifts).
    ``psola``: time-domain pitch-synchronous overlap-add (faster, keeps the
    original waveform's texture, more artefacts beyond ±0.3 octave).
    """
    _check_range("pitch", octaves, PITCH_OCTAVES_RANGE)
    samples = _as_float32(x)
    if octaves == 0.0 or _too_short_for_world(samples, sr):
        return samples.copy()
    ratio = float(2.0**octaves)
    if method == "world":
        world = _WorldParams(samples, sr)
        return world.synthesize(world.f0 * ratio)
    if method == "psola":
        # Grain overlap changes with the ratio; restore the input level.
        return _match_rms(_psola_shift(samples, sr, ratio), samples)
    raise InvalidInput(
        f"Unknown pitch method {method!r}; allowed: world, psola.",
        field="method",
        limit=["world", "psola"],
    )


# Unvoiced stretches are copied with this hop (constant-overlap Hann, so unchanged).
_PSOLA_UNVOICED_HOP_S = 0.005


def _psola_shift(x: np.ndarray, sr: int, ratio: float) -> np.ndarray:
    """TD-PSOLA: cut two-period Hann grains at the analysis pitch marks and
    overlap-add them at marks spaced by period / ratio on the same time axis."""
    x64 = x.astype(np.float64)
    f0, _ = _estimate_f0(x64, sr, "dio")
    hop_samples = sr * _FRAME_PERIOD_MS / 1000.0
    unvoiced_period = sr * _PSOLA_UNVOICED_HOP_S

    def local_f0(position: float) -> float:
        return float(f0[min(int(position / hop_samples + 0.5), len(f0) - 1)])

    # Analysis marks: one per pitch period in voiced parts, a fixed hop elsewhere.
    marks: list[float] = []
    position = 0.0
    while position < len(x):
        marks.append(position)
        freq = local_f0(position)
        position += sr / freq if freq > 0 else unvoiced_period
    mark_array = np.asarray(marks)

    max_half = int(np.ceil(sr / _F0_FLOOR_HZ)) + 1
    out = np.zeros(len(x) + 2 * max_half)
    synthesis_time = 0.0
    while synthesis_time < len(x):
        index = int(np.clip(np.searchsorted(mark_array, synthesis_time), 1, len(mark_array) - 1))
        if synthesis_time - mark_array[index - 1] < mark_array[index] - synthesis_time:
            index -= 1
        analysis_time = int(round(mark_array[index]))
        freq = local_f0(analysis_time)
        period = sr / freq if freq > 0 else unvoiced_period
        step = period / ratio if freq > 0 else period
        half = int(round(period))
        lo, hi = max(0, analysis_time - half), min(len(x), analysis_time + half + 1)
        window = np.hanning(2 * half + 1)[lo - (analysis_time - half) : hi - (analysis_time - half)]
        # Weight step / period keeps the mean window overlap at 1, i.e. energy constant.
        grain = x64[lo:hi] * window * (step / period)
        start = int(round(synthesis_time)) - (analysis_time - lo) + max_half
        out[start : start + len(grain)] += grain
        synthesis_time += step
    return out[max_half : max_half + len(x)].astype(np.float32)


# --------------------------------------------------------------------------- energy / EQ


def _high_shelf(
    sr: int, freq: float, gain_db: float, q: float = 1 / np.sqrt(2)
) -> tuple[np.ndarray, np.ndarray]:
    """Biquad high shelf (RBJ audio-EQ-cookbook form)."""
    amp = 10.0 ** (gain_db / 40.0)
    w0 = 2.0 * np.pi * freq / sr
    cos_w0, alpha = np.cos(w0), np.sin(w0) / (2.0 * q)
    root = 2.0 * np.sqrt(amp) * alpha
    b = np.array(
        [
            amp * ((amp + 1) + (amp - 1) * cos_w0 + root),
            -2 * amp * ((amp - 1) + (amp + 1) * cos_w0),
            amp * ((amp + 1) + (amp - 1) * cos_w0 - root),
        ]
    )
    a = np.array(
        [
            (amp + 1) - (amp - 1) * cos_w0 + root,
            2 * ((amp - 1) - (amp + 1) * cos_w0),
            (amp + 1) - (amp - 1) * cos_w0 - root,
        ]
    )
    return b / a[0], a / a[0]


def apply_energy(x: np.ndarray, sr: int, energy: float) -> np.ndarray:
    """Vocal effort for ``energy`` in 0.8–1.2: gain (±3 dB) plus a high shelf above
    1.5 kHz (±3 dB). May exceed full scale; run ``true_peak_limit`` afterwards."""
    _check_range("energy", energy, ENERGY_RANGE)
    samples = _as_float32(x)
    if energy == 1.0 or samples.size == 0:
        return samples.copy()
    # Imported on use: scipy.signal cost ~0.8-2.4 s of every start (importtime).
    from scipy import signal

    change_db = _ENERGY_DB_PER_UNIT * (energy - 1.0)
    b, a = _high_shelf(sr, min(_ENERGY_SHELF_HZ, 0.45 * sr), change_db)
    shaped = signal.lfilter(b, a, samples.astype(np.float64))
    return (shaped * 10.0 ** (change_db / 20.0)).astype(np.float32)


# --------------------------------------------------------------------------- loudness


def loudness_lufs(x: np.ndarray, sr: int) -> float:
    """Integrated loudness (BS.1770) of mono audio in LUFS; −inf for silence."""
    return integrated_loudness(_as_float32(x), sr)


# --------------------------------------------------------------------------- limiter


@cache
def _oversampling_taps() -> np.ndarray:
    """The low-pass FIR ``scipy.signal.resample_poly(x, up, 1)`` designs:
    ``firwin(20 * up + 1, 1 / up, window=("kaiser", 5.0)) * up``."""
    up = _LIMITER_OVERSAMPLE
    half = 10 * up
    m = np.arange(2 * half + 1) - half
    h = np.sinc(m / up) / up * np.kaiser(2 * half + 1, 5.0)
    return np.asarray(h / h.sum() * up)


def _oversampled_abs(x: np.ndarray) -> np.ndarray:
    """|x| upsampled ``_LIMITER_OVERSAMPLE`` times, as ``scipy.signal.resample_poly``
    computes it (same taps and alignment; equal to rounding, < 1e-15, tests/unit/
    test_effects.py), in numpy: the limiter runs on every piece, and importing
    scipy.signal for it cost ~0.8-2.4 s of `voxclone say` (python -X importtime)."""
    x64 = np.asarray(x, dtype=np.float64)
    up, n = _LIMITER_OVERSAMPLE, x64.size
    taps = _oversampling_taps()
    lead = (taps.size // 2) // up  # centre the filter: output j is input j / up
    out = np.empty(n * up)
    for phase in range(up):  # polyphase: output phase p uses every up-th tap from p
        out[phase::up] = np.convolve(x64, taps[phase::up])[lead : lead + n]
    return np.abs(out)


def true_peak_dbfs(x: np.ndarray) -> float:
    """True peak (4x oversampled) in dBFS; −inf for digital silence."""
    samples = _as_float32(x)
    if samples.size == 0:
        return float("-inf")
    peak = max(float(_oversampled_abs(samples).max()), float(np.abs(samples).max()))
    return float(20.0 * np.log10(peak)) if peak > 0 else float("-inf")


def _sample_peaks(x: np.ndarray) -> np.ndarray:
    """Per input sample, the largest oversampled |value| between its neighbours,
    so an inter-sample peak counts against both samples around it."""
    factor = _LIMITER_OVERSAMPLE
    upsampled = _oversampled_abs(x)
    per_sample = upsampled[: len(x) * factor].reshape(len(x), factor).max(axis=1)
    per_sample = np.maximum(per_sample, np.abs(x))
    from scipy import ndimage  # on use: see _limit_gain

    return ndimage.maximum_filter1d(per_sample, size=3)


def _limit_gain(x: np.ndarray, sr: int, ceiling: float) -> np.ndarray:
    """Smooth gain curve that is ≤ ceiling / peak at every sample.

    min-filter (hold the lowest needed gain across the look-ahead window) →
    one-pole release, never above the held value → moving average over the same
    window. Every value averaged at sample n was held down to n's need, so the
    average is too: the bound survives the smoothing.
    """
    # Imported on use (only when a piece must be limited): scipy.signal and
    # scipy.ndimage cost ~0.8-2.4 s of every start (python -X importtime).
    from scipy import ndimage, signal

    peaks = _sample_peaks(x)
    needed = np.minimum(1.0, ceiling / np.maximum(peaks, 1e-12))
    window = max(1, int(round(sr * _LIMITER_LOOKAHEAD_MS / 1000.0))) | 1  # odd, centred
    held = ndimage.minimum_filter1d(needed, size=window)
    coeff = float(np.exp(-1.0 / (sr * _LIMITER_RELEASE_MS / 1000.0)))
    b, a = np.array([1.0 - coeff]), np.array([1.0, -coeff])
    released, _ = signal.lfilter(b, a, held, zi=signal.lfilter_zi(b, a) * held[0])
    released = np.minimum(released, held)
    return ndimage.uniform_filter1d(released, size=window, mode="nearest")


def true_peak_limit(x: np.ndarray, sr: int, ceiling_dbfs: float = -1.0) -> np.ndarray:
    """Look-ahead limiter: the output's true peak (4x oversampled) ≤ ``ceiling_dbfs``.

    Gain only goes down where needed, smoothly, so there is no hard clipping.
    The gain is computed per input sample while the interpolated waveform also
    depends on neighbours, so we re-measure and repeat; a final uniform gain
    covers the rare remainder to make the bound a guarantee.
    """
    samples = _as_float32(x).astype(np.float64)
    if samples.size == 0:
        return samples.astype(np.float32)
    ceiling = 10.0 ** (ceiling_dbfs / 20.0)
    target = 10.0 ** ((ceiling_dbfs - _LIMITER_MARGIN_DB) / 20.0)
    for _ in range(_LIMITER_MAX_PASSES):
        if true_peak_dbfs(samples) <= ceiling_dbfs - _LIMITER_MARGIN_DB / 2:
            break
        samples = samples * _limit_gain(samples, sr, target)
    peak = 10.0 ** (true_peak_dbfs(samples) / 20.0)
    if peak > ceiling:
        samples = samples * (target / peak)
    return samples.astype(np.float32)
