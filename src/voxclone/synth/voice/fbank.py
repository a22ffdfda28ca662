"""Kaldi-style log mel filterbanks in NumPy (the CAM++ listener's input).

CAM++ was trained on Kaldi ``compute-fbank-feats`` features: 25 ms frames every
10 ms that fit wholly inside the clip ("snip edges"), each frame's DC offset
removed, pre-emphasis 0.97, Povey window (a Hann window raised to 0.85),
zero-padded to a 512-point FFT, power spectrum, triangular filters equally
spaced on Kaldi's mel scale (1127 ln(1 + f/700)) between 20 Hz and Nyquist,
natural log floored at float32 epsilon. No dither: the features of one clip
are the same on every call. Computed in float64 and returned as float32.
"""

from __future__ import annotations

import functools

import numpy as np

SAMPLE_RATE = 16_000
FRAME_LENGTH = 400  # 25 ms
FRAME_SHIFT = 160  # 10 ms
N_FFT = 512  # the frame length rounded up to a power of two
N_MELS = 80
LOW_FREQ = 20.0
PREEMPHASIS = 0.97
WINDOW_POWER = 0.85
LOG_FLOOR = float(np.finfo(np.float32).eps)


def kaldi_mel(hz: np.ndarray | float) -> np.ndarray:
    return 1127.0 * np.log1p(np.asarray(hz, dtype=np.float64) / 700.0)


def kaldi_mel_to_hz(mel: np.ndarray | float) -> np.ndarray:
    return 700.0 * np.expm1(np.asarray(mel, dtype=np.float64) / 1127.0)


def mel_centres_hz(
    n_mels: int = N_MELS, sample_rate: int = SAMPLE_RATE, low_freq: float = LOW_FREQ
) -> np.ndarray:
    """Centre frequency of each filter (its triangle's peak)."""
    low, high = kaldi_mel(low_freq), kaldi_mel(sample_rate / 2)
    step = (high - low) / (n_mels + 1)
    return kaldi_mel_to_hz(low + step * np.arange(1, n_mels + 1))


@functools.lru_cache(maxsize=4)
def mel_filters(
    n_mels: int = N_MELS, sample_rate: int = SAMPLE_RATE, low_freq: float = LOW_FREQ
) -> np.ndarray:
    """[n_mels, N_FFT // 2 + 1] triangles, built in the mel domain; the Nyquist
    bin gets no weight (Kaldi builds its filters over the first N_FFT/2 bins)."""
    low, high = kaldi_mel(low_freq), kaldi_mel(sample_rate / 2)
    step = (high - low) / (n_mels + 1)
    left = low + step * np.arange(n_mels)[:, None]
    centre, right = left + step, left + 2 * step
    bins_mel = kaldi_mel(np.arange(N_FFT // 2) * (sample_rate / N_FFT))[None, :]
    rising = (bins_mel - left) / (centre - left)
    falling = (right - bins_mel) / (right - centre)
    weights = np.maximum(0.0, np.minimum(rising, falling))
    out = np.zeros((n_mels, N_FFT // 2 + 1))
    out[:, : N_FFT // 2] = weights
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=1)
def povey_window() -> np.ndarray:
    n = np.arange(FRAME_LENGTH)
    window = (0.5 - 0.5 * np.cos(2 * np.pi * n / (FRAME_LENGTH - 1))) ** WINDOW_POWER
    window.setflags(write=False)
    return window


def frame_count(n_samples: int) -> int:
    return 0 if n_samples < FRAME_LENGTH else 1 + (n_samples - FRAME_LENGTH) // FRAME_SHIFT


def log_fbank(wave: np.ndarray, *, n_mels: int = N_MELS) -> np.ndarray:
    """[frames, n_mels] log filterbank energies of 16 kHz mono float audio."""
    x = np.asarray(wave, dtype=np.float64).ravel()
    n = frame_count(x.size)
    if n == 0:
        return np.zeros((0, n_mels), dtype=np.float32)
    frames = np.lib.stride_tricks.sliding_window_view(x, FRAME_LENGTH)[::FRAME_SHIFT][:n]
    frames = frames - frames.mean(axis=1, keepdims=True)
    # Pre-emphasis; the first sample is emphasised against itself (Kaldi).
    previous = np.concatenate([frames[:, :1], frames[:, :-1]], axis=1)
    frames = (frames - PREEMPHASIS * previous) * povey_window()
    power = np.abs(np.fft.rfft(frames, n=N_FFT, axis=1)) ** 2
    energies = power @ mel_filters(n_mels).T
    return np.log(np.maximum(energies, LOG_FLOOR)).astype(np.float32)


def mean_normalized_fbank(wave: np.ndarray, *, n_mels: int = N_MELS) -> np.ndarray:
    """:func:`log_fbank` minus its per-clip mean (what CAM++ was trained on)."""
    feats = log_fbank(wave, n_mels=n_mels)
    if feats.shape[0]:
        feats = feats - feats.mean(axis=0, keepdims=True)
    return feats
