"""Apply resolved speaking controls to one synthesized piece.

Speed is not here: Kokoro's own duration control handles it at synthesis.
Everything else is DSP on the 24 kHz waveform, ending in a true-peak limiter
so no control combination can clip.
"""

from __future__ import annotations

import numpy as np

from voxclone.synth.audio.effects import (
    apply_energy,
    pitch_shift,
    scale_f0_range,
    true_peak_limit,
    whisperize,
)
from voxclone.synth.controls import ResolvedControls

PEAK_CEILING_DBFS = -1.0


def apply_controls(audio: np.ndarray, sample_rate: int, controls: ResolvedControls) -> np.ndarray:
    x = np.asarray(audio, dtype=np.float32)
    if x.size == 0:
        return x
    if controls.whisper:
        x = whisperize(x, sample_rate)
    else:
        if abs(controls.f0_range - 1.0) > 1e-3:
            x = scale_f0_range(x, sample_rate, controls.f0_range)
        if abs(controls.pitch) > 1e-3:
            x = pitch_shift(x, sample_rate, controls.pitch)
    if abs(controls.energy - 1.0) > 1e-3:
        x = apply_energy(x, sample_rate, controls.energy)
    return true_peak_limit(x, sample_rate, ceiling_dbfs=PEAK_CEILING_DBFS).astype(np.float32)
