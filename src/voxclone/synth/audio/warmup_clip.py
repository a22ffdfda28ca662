"""A synthetic vowel sequence that the speech detector hears as speech.

Used once, before the first clone, to run an upload's whole path (decode,
speech detection, SNR, loudness, pitch, spectrum, embedding): each step loads
a model or imports a library on first use, and the first real clone paid for
all of them (0.7 s on 2 cores, after the encoder itself was loaded). Rendering
a sentence with the engine would do the same but would hold the engine that
a live stream may need at that moment; this costs a few milliseconds.
"""

from __future__ import annotations

import io

import numpy as np

RATE = 16_000
# First three formants (centre, bandwidth in Hz) of five vowels: a, i, u, e, o.
VOWELS = (
    ((700.0, 110.0), (1220.0, 120.0), (2600.0, 160.0)),
    ((300.0, 60.0), (2300.0, 100.0), (3000.0, 150.0)),
    ((350.0, 70.0), (800.0, 80.0), (2300.0, 140.0)),
    ((500.0, 80.0), (1800.0, 100.0), (2500.0, 150.0)),
    ((600.0, 90.0), (1000.0, 90.0), (2500.0, 150.0)),
)
# Syllables of 150 ms with 50 ms gaps: Silero heard all 3 s as speech, while
# 220-300 ms syllables of one vowel each were heard only in part (0.4-1.2 s).
SYLLABLE_S = 0.15
GAP_S = 0.05


def _syllable(vowel: int, f0_hz: float) -> np.ndarray:
    from scipy.signal import lfilter

    n = int(SYLLABLE_S * RATE)
    f0 = f0_hz * (1.1 - 0.2 * np.arange(n) / n)  # falling, as a spoken syllable
    x = (np.diff(np.floor(np.cumsum(f0) / RATE), prepend=0.0) > 0).astype(np.float64)
    for centre, bandwidth in VOWELS[vowel % len(VOWELS)]:
        radius = np.exp(-np.pi * bandwidth / RATE)
        angle = 2 * np.pi * centre / RATE
        x = lfilter([1 - radius], [1, -2 * radius * np.cos(angle), radius**2], x)
    x *= np.sqrt(np.hanning(n))
    return x / max(float(np.abs(x).max()), 1e-9)


def vowel_clip(seconds: float = 3.0, *, f0_hz: float = 120.0, seed: int = 0) -> np.ndarray:
    """Glottal pulses through formant resonators, a vowel per syllable, at
    -10 dBFS peak over a faint noise floor."""
    rng = np.random.default_rng(seed)
    total = int(seconds * RATE)
    pieces: list[np.ndarray] = []
    length = 0
    while length < total:
        pitch = f0_hz * (1.0 + 0.05 * float(rng.standard_normal()))
        pieces += [_syllable(len(pieces) // 2, pitch), np.zeros(int(GAP_S * RATE))]
        length += pieces[-2].size + pieces[-1].size
    x = np.concatenate(pieces)[:total]
    return (0.3 * x + 0.001 * rng.standard_normal(total)).astype(np.float32)


def vowel_wav(seconds: float = 3.0) -> bytes:
    """:func:`vowel_clip` as 16-bit WAV bytes, as an upload arrives."""
    import soundfile as sf

    buffer = io.BytesIO()
    sf.write(buffer, vowel_clip(seconds), RATE, format="WAV", subtype="PCM_16")
    return buffer.getvalue()
