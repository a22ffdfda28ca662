"""The torch-free speaker encoder against resemblyzer's own (torch) one.

The atlas's embeddings were measured with resemblyzer; the product encoder
must give the same vectors, or every lookup drifts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxclone.errors import ModelAssetError
from voxclone.synth.voice import ge2e

DATA = Path(__file__).resolve().parents[1] / "data"


def _speech_like(seconds: float, seed: int) -> np.ndarray:
    """Voiced bursts (harmonics of a moving F0) with pauses: something both
    silence trimmers and the network react to."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16_000)) / 16_000
    f0 = 120 + 40 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / 16_000
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    gate = (np.sin(2 * np.pi * 0.45 * t) > -0.3).astype(float)
    noise = 0.01 * rng.standard_normal(t.size)
    return (0.3 * voiced * gate + noise).astype(np.float32)


def _clips() -> list[np.ndarray]:
    import soundfile as sf

    clips = [_speech_like(s, i) for i, s in enumerate((0.6, 2.5, 7.3))]
    for wav in sorted(DATA.glob("*.wav"))[:2]:
        x, rate = sf.read(wav, dtype="float32", always_2d=True)
        import soxr

        clips.append(soxr.resample(x.mean(axis=1), rate, 16_000).astype(np.float32))
    return clips


def test_mel_filters_match_librosa() -> None:
    librosa = pytest.importorskip("librosa")
    expected = librosa.filters.mel(sr=16_000, n_fft=400, n_mels=40)
    assert np.allclose(ge2e.mel_basis(), expected, atol=1e-7)
    wav = _speech_like(1.3, 3)
    frames = librosa.feature.melspectrogram(y=wav, sr=16_000, n_fft=400, hop_length=160, n_mels=40)
    ours = ge2e.mel_frames(wav, ge2e.mel_basis())
    assert ours.shape == frames.T.shape
    assert np.allclose(ours, frames.T, rtol=1e-4, atol=1e-6 * float(frames.max()))


def test_the_weights_reader_accepts_only_tensors_and_dicts(tmp_path: Path) -> None:
    import pickle

    bad = tmp_path / "evil.pt"
    with bad.open("wb") as out:
        for header in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}):
            pickle.dump(header, out)
        pickle.dump({"model_state": print}, out)  # a callable, not a tensor
    with pytest.raises(ModelAssetError):
        ge2e.read_legacy_state(bad)
    plain = tmp_path / "plain.pt"
    plain.write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(ModelAssetError):
        ge2e.read_legacy_state(plain)


def test_silence_gives_a_finite_embedding() -> None:
    network = ge2e.Ge2eNetwork.load()
    for clip in (np.zeros(16_000, np.float32), np.zeros(10, np.float32)):
        vector = network.embed_utterance(ge2e.preprocess(clip))
        assert vector.shape == (256,) and np.isfinite(vector).all()
