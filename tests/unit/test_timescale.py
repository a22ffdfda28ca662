"""WSOLA tempo change keeps pitch and hits the requested duration."""

from __future__ import annotations

import numpy as np
import pytest

from voxclone.synth.audio.effects import median_f0
from voxclone.synth.audio.timescale import time_stretch

SR = 24_000


def _voice_like(seconds: float = 2.0, f0: float = 160.0) -> np.ndarray:
    t = np.arange(int(SR * seconds)) / SR
    vibrato = f0 * (1 + 0.03 * np.sin(2 * np.pi * 5 * t))
    phase = 2 * np.pi * np.cumsum(vibrato) / SR
    tone = sum(np.sin(k * phase) / k for k in range(1, 12))
    syllables = 0.6 + 0.4 * np.sin(2 * np.pi * 4 * t)
    return (0.2 * tone * syllables).astype(np.float32)


@pytest.mark.parametrize("rate", [0.6, 1.3, 1.6, 2.0])
def test_duration_follows_rate_and_pitch_stays(rate: float) -> None:
    # 1.2 s: the two F0 estimates took 0.94 s of CPU on 2 s at rate 0.6.
    x = _voice_like(1.2)
    y = time_stretch(x, SR, rate)
    assert y.dtype == np.float32
    assert abs(y.size - x.size / rate) <= 0.01 * x.size / rate
    assert median_f0(y, SR) == pytest.approx(median_f0(x, SR), rel=0.03)
    assert np.max(np.abs(y)) <= np.max(np.abs(x)) * 1.2


def test_identity_and_empty() -> None:
    x = _voice_like(0.5)
    assert time_stretch(x, SR, 1.0) is not None and time_stretch(x, SR, 1.0).size == x.size
    assert time_stretch(np.zeros(0, np.float32), SR, 1.7).size == 0
    with pytest.raises(ValueError):
        time_stretch(x, SR, 0.0)
