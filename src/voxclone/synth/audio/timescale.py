"""Tempo change without pitch change (WSOLA).

Kokoro's own duration control collapses above ~1.3×: at speed 2.0 Whisper
tiny.en scored 67–100 % WER on our test sentences. Rendering at the highest
speed the model handles well and compressing the rest with WSOLA (waveform
similarity overlap-add) measured 0–11 % WER at 2.0 on the same sentences, at
~0.01 s of CPU per second of audio. bench/results/controls.md has the numbers.

WSOLA: output frames are laid down at a fixed hop; each is copied from the
input near the position the tempo ratio asks for, shifted within a small
tolerance so that it lines up (maximum cross-correlation) with the natural
continuation of the previous frame. Pitch periods are kept intact, so pitch
and timbre do not change.
"""

from __future__ import annotations

import numpy as np

FRAME_MS = 30.0
TOLERANCE_FRACTION = 0.25  # search ± this fraction of a frame for the best alignment


def time_stretch(x: np.ndarray, sample_rate: int, rate: float) -> np.ndarray:
    """Play ``x`` ``rate`` times faster (rate > 1 shortens) at the same pitch."""
    audio = np.asarray(x, dtype=np.float32)
    if audio.size == 0 or abs(rate - 1.0) < 1e-3:
        return audio
    if rate <= 0:
        raise ValueError("rate must be positive")
    frame = max(16, int(sample_rate * FRAME_MS / 1000) // 2 * 2)
    hop = frame // 2
    tolerance = int(frame * TOLERANCE_FRACTION)
    window = np.hanning(frame).astype(np.float32)
    out_len = int(round(audio.size / rate))
    padded = np.pad(audio, (tolerance, frame + tolerance))

    out = np.zeros(out_len + frame, dtype=np.float32)
    weight = np.zeros_like(out)
    continuation: np.ndarray | None = None
    out_pos = 0
    k = 0
    while out_pos < out_len:
        nominal = int(k * hop * rate) + tolerance
        if nominal + frame + tolerance > padded.size:
            break
        if continuation is None:
            start = nominal
        else:
            region = padded[nominal - tolerance : nominal + tolerance + frame]
            scores = np.correlate(region, continuation, mode="valid")
            start = nominal - tolerance + int(np.argmax(scores))
        out[out_pos : out_pos + frame] += padded[start : start + frame] * window
        weight[out_pos : out_pos + frame] += window
        continuation = padded[start + hop : start + hop + frame]
        out_pos += hop
        k += 1
    weight[weight < 1e-3] = 1.0
    return (out / weight)[:out_len]
