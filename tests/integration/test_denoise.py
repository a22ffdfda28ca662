"""RNNoise denoiser (pyrnnoise's shipped library): aligned, same length, less noise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voxclone.synth.audio.denoise import Denoiser

DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    x, rate = sf.read(DATA / "librispeech_1088-129236-0000.wav", dtype="float32")
    assert rate == 16_000
    return x[: 4 * rate]


def _snr(clean: np.ndarray, other: np.ndarray) -> float:
    return float(10 * np.log10(np.mean(clean**2) / np.mean((other - clean) ** 2)))


def test_denoising_raises_snr_and_keeps_alignment(speech: np.ndarray) -> None:
    rng = np.random.default_rng(0)
    noise = rng.standard_normal(speech.size).astype(np.float32)
    noise *= np.sqrt(np.mean(speech**2) / np.mean(noise**2) / 10 ** (5 / 10))  # 5 dB
    noisy = speech + noise
    out = Denoiser().denoise(noisy, 16_000)
    assert out.shape == speech.shape and out.dtype == np.float32
    assert _snr(speech, out) > _snr(speech, noisy) + 3.0
    # Aligned with the input (the model's two-frame lag is removed): the
    # cross-correlation with the clean speech peaks at lag 0.
    lags = range(-320, 321, 16)
    corr = [float(np.dot(np.roll(out, -lag), speech)) for lag in lags]
    assert list(lags)[int(np.argmax(corr))] == 0


def test_denoiser_works_at_other_rates_and_on_empty_input() -> None:
    d = Denoiser()
    assert d.denoise(np.zeros(0, np.float32), 16_000).size == 0
    tone = 0.1 * np.sin(2 * np.pi * 220 * np.arange(24_000) / 24_000).astype(np.float32)
    out = d.denoise(tone, 24_000)
    assert out.shape == tone.shape and np.all(np.abs(out) <= 1.0)


def test_a_long_clip_denoised_in_pieces_joins_without_a_seam(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from voxclone.synth.audio import denoise

    x, rate = sf.read(DATA / "librispeech_1088-129236-0000.wav", dtype="float32")
    clip = np.tile(x, 2)[: 14 * rate]  # 14 s: two pieces of 7 s
    rng = np.random.default_rng(1)
    noise = rng.standard_normal(clip.size).astype(np.float32)
    noisy = clip + noise * np.sqrt(np.mean(clip**2) / np.mean(noise**2) / 10 ** (5 / 10))
    d = Denoiser()
    monkeypatch.setattr(denoise, "_cores", lambda: 1)
    whole = d.denoise(noisy, rate)
    pieces_run: list[tuple[int, int]] = []
    run = Denoiser._run

    def counted(self: Denoiser, padded: np.ndarray, out: np.ndarray, a: int, b: int) -> None:
        pieces_run.append((a, b))
        run(self, padded, out, a, b)

    monkeypatch.setattr(denoise, "_cores", lambda: 2)
    monkeypatch.setattr(Denoiser, "_run", counted)
    joined = d.denoise(noisy, rate)
    assert len(pieces_run) == 2 and joined.shape == whole.shape
    # Measured: 43.9 dB apart overall, 38 dB in the second around the join
    # (a second of warm-up; 25 frames gave 34 dB overall).
    assert _snr(whole, joined) > 38.0
    seam = slice(joined.size // 2 - rate // 2, joined.size // 2 + rate // 2)
    assert _snr(whole[seam], joined[seam]) > 32.0
