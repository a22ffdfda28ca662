"""Loudness matching of speech that several voices take turns in (a dialogue).

Each turn is measured with ITU-R BS.1770 gated integrated loudness
(K-weighted mean square over 400 ms blocks, the −70 LUFS absolute and −10 LU
relative gates: ``quality.integrated_loudness``, the same measure the
reference checks use), scaled to one target, then held under a −1 dBTP true
peak by the look-ahead limiter the speech controls already use. Plain RMS
was not enough: it counts the pauses inside a turn (a turn with two pauses
reads quieter than one without) and weighs low frequencies as much as the
presence band, so a deep voice would be turned down against a bright one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from voxclone.synth.audio.effects import true_peak_limit
from voxclone.synth.audio.quality import integrated_loudness

# Where every turn is brought. Kokoro's voices speak at about −21 to −17 LUFS
# (measured on the dialogue tests' voices), so −20 asks little gain of any of
# them and leaves the peaks a few dB under the −1 dBTP ceiling.
DIALOGUE_TARGET_LUFS = -20.0
# A turn is never raised or lowered by more than this: a turn that is almost
# all breath or silence would otherwise have its noise floor pushed up.
MAX_GAIN_DB = 12.0
PEAK_CEILING_DBTP = -1.0


@dataclass(frozen=True)
class Leveled:
    """A turn's audio brought to the target, and what it measured before."""

    audio: np.ndarray
    measured_lufs: float  # −inf for silence
    gain_db: float


def level_to(
    x: np.ndarray,
    sr: int,
    target_lufs: float = DIALOGUE_TARGET_LUFS,
    *,
    max_gain_db: float = MAX_GAIN_DB,
) -> Leveled:
    """``x`` (mono float32) scaled to ``target_lufs`` integrated loudness
    (gain clamped to ±``max_gain_db``), its true peak limited to
    PEAK_CEILING_DBTP. Silence is returned as it is."""
    samples = np.asarray(x, dtype=np.float32)
    measured = integrated_loudness(samples, sr) if samples.size else -math.inf
    if not math.isfinite(measured):
        return Leveled(samples.copy(), measured, 0.0)
    gain_db = float(np.clip(target_lufs - measured, -max_gain_db, max_gain_db))
    scaled = samples * np.float32(10.0 ** (gain_db / 20.0))
    return Leveled(true_peak_limit(scaled, sr, PEAK_CEILING_DBTP), measured, gain_db)
