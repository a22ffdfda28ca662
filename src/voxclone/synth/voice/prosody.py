"""Pitch statistics of a clip, and choosing a prosody half that matches them.

Kokoro's prosody half (style dims 128–255) sets pitch; the timbre half barely
moves it. So a clone takes its timbre from the speaker-encoder match and its
prosody from whichever measured prosody recipe lands closest to the target's
median F0 (in octaves), preferring intelligible ones.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

F0_FLOOR_HZ = 60.0
F0_CEIL_HZ = 500.0


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
    """F0 statistics from WORLD's DIO + StoneMask (fast, robust enough for medians)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyworld imports pkg_resources
        import pyworld

    x = np.asarray(audio, dtype=np.float64).ravel()
    if x.size < sample_rate // 10:
        return PitchStats(0.0, 0.0, 0.0, 0.0)
    f0, times = pyworld.dio(
        x, sample_rate, f0_floor=F0_FLOOR_HZ, f0_ceil=F0_CEIL_HZ, frame_period=10.0
    )
    f0 = pyworld.stonemask(x, f0, times, sample_rate)
    voiced = f0[f0 > 0]
    if voiced.size < 5:
        return PitchStats(0.0, 0.0, 0.0, float(voiced.size) / max(f0.size, 1))
    low, median, high = np.percentile(voiced, [10, 50, 90])
    return PitchStats(float(median), float(low), float(high), float(voiced.size) / f0.size)


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
    cost = np.where(usable, cost, np.inf)
    return int(np.argmin(cost))
