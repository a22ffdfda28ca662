"""Pitch statistics of a clip, and choosing a prosody half that matches them.

Kokoro's prosody half (style dims 128–255) sets pitch; the timbre half barely
moves it. So a clone takes its timbre from the speaker-encoder match and its
prosody from whichever measured prosody recipe lands closest to the target's
median F0 (in octaves), preferring intelligible ones.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

F0_FLOOR_HZ = 60.0
F0_CEIL_HZ = 500.0
# Below every speaking voice's F0 floor, above 50/60 Hz mains hum.
HIGHPASS_HZ = 70.0
# Trimmed speech is normally 35-90 % voiced by DIO; under this it has failed
# (LibriSpeech 103: 17-19 % voiced after the high-pass, median 79-192 Hz).
MIN_DIO_VOICED_FRACTION = 0.25
# Harvest costs ~0.2 s per second of audio: its fallback hears at most this much.
HARVEST_MAX_S = 5.0


@dataclass(frozen=True)
class PitchStats:
    median_hz: float  # 0.0 when no voiced frames were found
    low_hz: float  # 10th percentile
    high_hz: float  # 90th percentile
    voiced_fraction: float

    @property
    def range_octaves(self) -> float:
        if self.low_hz <= 0:
            return 0.0
        return float(np.log2(self.high_hz / self.low_hz))


def pitch_stats(audio: np.ndarray, sample_rate: int) -> PitchStats:
    """F0 statistics from WORLD's DIO + StoneMask after a 70 Hz high-pass.

    DIO is ~50x faster than Harvest, which keeps an instant clone well under a
    second, but on real recordings it has two failure modes we measured on the
    dev set: mains hum (LibriSpeech 103 read as a 61 Hz "voice", 5 % voiced,
    where Harvest hears 205 Hz) and large unvoiced stretches. The high-pass
    removes the hum; when DIO still finds almost nothing voiced in what is
    trimmed speech, a bounded Harvest pass decides instead.
    """
    # Imported on use: scipy.signal cost ~0.8-2.4 s of every start (python -X importtime),
    # and only cloning measures pitch (tests/integration/test_import_cost.py).
    from scipy.signal import sosfiltfilt

    x = np.asarray(audio, dtype=np.float64).ravel()
    if x.size < sample_rate // 10:
        return PitchStats(0.0, 0.0, 0.0, 0.0)
    x = np.ascontiguousarray(sosfiltfilt(_highpass(sample_rate), x))
    f0 = _dio(x, sample_rate)
    voiced_fraction = float((f0 > 0).mean())
    if voiced_fraction < MIN_DIO_VOICED_FRACTION:
        excerpt = x[: int(HARVEST_MAX_S * sample_rate)]
        fallback = _harvest(excerpt, sample_rate)
        if (fallback > 0).mean() > voiced_fraction:
            f0, voiced_fraction = fallback, float((fallback > 0).mean())
    voiced = f0[f0 > 0]
    if voiced.size < 5:
        return PitchStats(0.0, 0.0, 0.0, voiced_fraction)
    low, median, high = np.percentile(voiced, [10, 50, 90])
    return PitchStats(float(median), float(low), float(high), voiced_fraction)


@lru_cache(maxsize=8)
def _highpass(sample_rate: int) -> np.ndarray:
    from scipy.signal import butter  # on use: see pitch_stats

    return np.asarray(butter(4, HIGHPASS_HZ, "highpass", fs=sample_rate, output="sos"))


def _world() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyworld imports pkg_resources
        import pyworld
    return pyworld


def _dio(x: np.ndarray, sample_rate: int) -> np.ndarray:
    world = _world()
    f0, times = world.dio(
        x, sample_rate, f0_floor=F0_FLOOR_HZ, f0_ceil=F0_CEIL_HZ, frame_period=10.0
    )
    return np.asarray(world.stonemask(x, f0, times, sample_rate))


def _harvest(x: np.ndarray, sample_rate: int) -> np.ndarray:
    f0, _ = _world().harvest(
        x, sample_rate, f0_floor=F0_FLOOR_HZ, f0_ceil=F0_CEIL_HZ, frame_period=10.0
    )
    return np.asarray(f0)


def octave_distance(a_hz: float, b_hz: float) -> float:
    if a_hz <= 0 or b_hz <= 0:
        return 0.0
    return float(abs(np.log2(a_hz / b_hz)))


def choose_prosody(
    target_hz: float,
    candidate_f0: np.ndarray,
    candidate_wer: np.ndarray | None = None,
    *,
    wer_weight: float = 1.0,
) -> int:
    """Index of the prosody candidate to use for a target median F0.

    Cost = octave distance + ``wer_weight`` × WER: one tenth of an octave
    (~7 %) of pitch error is worth about 10 WER points; a candidate that is
    hard to understand never wins just because its pitch fits.
    """
    return int(rank_prosody(target_hz, candidate_f0, candidate_wer, wer_weight=wer_weight)[0])


def rank_prosody(
    target_hz: float,
    candidate_f0: np.ndarray,
    candidate_wer: np.ndarray | None = None,
    *,
    wer_weight: float = 1.0,
) -> np.ndarray:
    """Candidates with a measured pitch, best first by :func:`choose_prosody`'s cost."""
    f0 = np.asarray(candidate_f0, dtype=np.float64)
    usable = f0 > 0
    if not usable.any():
        raise ValueError("no prosody candidate has a measured pitch")
    if target_hz <= 0:
        cost = np.zeros_like(f0)
    else:
        cost = np.abs(np.log2(np.where(usable, f0, 1.0) / target_hz))
    if candidate_wer is not None:
        cost = cost + wer_weight * np.asarray(candidate_wer, dtype=np.float64)
    order = np.argsort(np.where(usable, cost, np.inf), kind="stable")
    return order[: int(usable.sum())]


# Speaking rate: syllable nuclei counted as peaks of the smoothed band energy
# (300-2500 Hz holds the vowels' first two formants). No transcript is needed,
# so the same measure applies to a user's reference and to a synthetic voice;
# it is a relative cue (a faster talker gives more peaks per second of speech),
# not an exact syllable count.
RATE_BAND_HZ = (300.0, 2500.0)
RATE_FRAME_S = 0.01
RATE_SMOOTH_S = 0.05
RATE_MIN_GAP_S = 0.09  # faster than ~11 syllables/s is not speech
RATE_PROMINENCE_DB = 4.0
RATE_ACTIVE_RANGE_DB = 30.0  # frames this far below the loudest count as pauses


def speaking_rate(audio: np.ndarray, sample_rate: int) -> float:
    """Energy peaks per second of active speech (about syllables per second); 0.0 if silent."""
    from scipy.signal import butter, find_peaks, sosfiltfilt  # on use: see pitch_stats

    x = np.asarray(audio, dtype=np.float64).ravel()
    frame = max(1, round(RATE_FRAME_S * sample_rate))
    if x.size < 20 * frame:
        return 0.0
    low, high = RATE_BAND_HZ
    sos = butter(
        4, [low, min(high, 0.45 * sample_rate)], btype="bandpass", fs=sample_rate, output="sos"
    )
    band = sosfiltfilt(sos, x)
    n = band.size // frame
    power = np.mean(band[: n * frame].reshape(n, frame) ** 2, axis=1)
    smooth = max(1, round(RATE_SMOOTH_S / RATE_FRAME_S))
    power = np.convolve(power, np.ones(smooth) / smooth, mode="same")
    level = 10.0 * np.log10(power + 1e-12)
    if level.max() < -90.0:
        return 0.0
    active = level > level.max() - RATE_ACTIVE_RANGE_DB
    active_s = float(active.sum()) * RATE_FRAME_S
    if active_s <= 0.2:
        return 0.0
    peaks, _ = find_peaks(
        np.where(active, level, level.max() - RATE_ACTIVE_RANGE_DB),
        prominence=RATE_PROMINENCE_DB,
        distance=max(1, round(RATE_MIN_GAP_S / RATE_FRAME_S)),
    )
    return float(len(peaks) / active_s)
