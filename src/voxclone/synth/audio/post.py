"""Apply resolved speaking controls to one synthesized piece.

Speed is mostly not here: Kokoro's own duration control handles it at
synthesis up to ``ENGINE_SPEED_MAX``; faster tempos are finished here by WSOLA
time compression (``controls.tempo``). Everything else is DSP on the 24 kHz
waveform, ending in a true-peak limiter
that runs on every piece (even with neutral controls), so no control
combination and no loud engine output can exceed ``PEAK_CEILING_DBFS``.

Order matters: F0 edits first (they resynthesize the waveform), then vocal
effort (gain + spectral tilt), then the limiter last because every earlier
stage can raise peaks.
"""

from __future__ import annotations

import numpy as np

from voxclone.synth.audio.effects import (
    PitchMethod,
    apply_energy,
    pitch_shift,
    scale_f0_range,
    true_peak_limit,
    whisperize,
)
from voxclone.synth.audio.timescale import time_stretch
from voxclone.synth.controls import ResolvedControls

PEAK_CEILING_DBFS = -1.0

# Chosen by bench/controls_eval.py (default voice, ±0.25/±0.5 octave, 3 sentences):
# PSOLA missed the requested interval by 6 % on average (max 13 %) against WORLD's
# 8 % (max 23 %), kept more resemblyzer similarity to the unshifted voice (0.849 vs
# 0.811), kept WER at 0 like WORLD, and costs 0.017 s per second of audio vs 0.082.
# See synth/controls.py for why not the style vector.
PITCH_METHOD: PitchMethod = "psola"

_EPSILON = 1e-3


def apply_controls(
    audio: np.ndarray,
    sample_rate: int,
    controls: ResolvedControls,
    *,
    pitch_method: PitchMethod = PITCH_METHOD,
) -> np.ndarray:
    """Tempo, pitch / F0 range / whisper / energy, then the true-peak limiter."""
    x = np.asarray(audio, dtype=np.float32)
    if x.size == 0:
        return x
    if abs(controls.tempo - 1.0) > _EPSILON:
        x = time_stretch(x, sample_rate, controls.tempo)
    if controls.whisper:
        # No voicing left to shift or reshape.
        x = whisperize(x, sample_rate)
    else:
        if abs(controls.f0_range - 1.0) > _EPSILON:
            x = scale_f0_range(x, sample_rate, controls.f0_range)
        if abs(controls.pitch) > _EPSILON:
            x = pitch_shift(x, sample_rate, controls.pitch, method=pitch_method)
    if abs(controls.energy - 1.0) > _EPSILON:
        x = apply_energy(x, sample_rate, controls.energy)
    return true_peak_limit(x, sample_rate, ceiling_dbfs=PEAK_CEILING_DBFS).astype(np.float32)
