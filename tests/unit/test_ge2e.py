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
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder

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


def test_embeddings_match_resemblyzer(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from resemblyzer import VoiceEncoder, preprocess_wav

    reference = VoiceEncoder(device="cpu", verbose=False)
    ours = SpeakerEncoder(models_dir=tmp_path)
    for clip in _clips():
        trimmed = preprocess_wav(clip, source_sr=16_000)
        assert np.array_equal(ge2e.preprocess(clip), trimmed if trimmed.size >= 4000 else clip)
        expected = reference.embed_utterance(trimmed if trimmed.size >= 4000 else clip)
        assert float(ours.embed(clip) @ expected) > 0.99999
    # The graph was saved and the next encoder reads it instead of building it.
    saved = list(tmp_path.glob("ge2e-*.onnx"))
    assert len(saved) == 1
    again = SpeakerEncoder(models_dir=tmp_path)
    clip = _clips()[1]
    assert np.allclose(again.embed(clip), ours.embed(clip), atol=1e-6)


def test_mel_filters_match_librosa() -> None:
    librosa = pytest.importorskip("librosa")
    expected = librosa.filters.mel(sr=16_000, n_fft=400, n_mels=40)
    assert np.allclose(ge2e.mel_basis(), expected, atol=1e-7)
    wav = _speech_like(1.3, 3)
    frames = librosa.feature.melspectrogram(y=wav, sr=16_000, n_fft=400, hop_length=160, n_mels=40)
    ours = ge2e.mel_frames(wav, ge2e.mel_basis())
    assert ours.shape == frames.T.shape
    assert np.allclose(ours, frames.T, rtol=1e-4, atol=1e-6 * float(frames.max()))


def test_a_damaged_saved_graph_is_built_again(tmp_path: Path) -> None:
    path = ge2e.saved_graph(tmp_path)
    path.write_bytes(b"not an onnx graph")
    network = ge2e.Ge2eNetwork.load(tmp_path)
    assert network.embed_utterance(_speech_like(2.0, 1)).shape == (256,)
    assert path.read_bytes()[:4] != b"not "


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


def test_the_encoder_imports_neither_torch_nor_onnx(tmp_path: Path) -> None:
    """Importing torch (and onnx) held the GIL for seconds while speech was
    served: the graph is built once in a child process and then only read."""
    import subprocess
    import sys

    code = (
        "import sys, pathlib, numpy as np\n"
        "from voxclone.synth.voice.speaker_encoder import SpeakerEncoder\n"
        f"e = SpeakerEncoder(models_dir=pathlib.Path({str(tmp_path)!r}))\n"
        "e.embed((0.1*np.random.default_rng(0).standard_normal(16000)).astype(np.float32))\n"
        "print('torch' in sys.modules, 'onnx' in sys.modules)\n"
    )
    for _ in range(2):  # builds the graph, then reads the saved one
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert run.stdout.split() == ["False", "False"]
        assert len(list(tmp_path.glob("ge2e-*.onnx"))) == 1
    assert not list(tmp_path.glob(".*.tmp"))


def test_silence_gives_a_finite_embedding() -> None:
    network = ge2e.Ge2eNetwork.load()
    for clip in (np.zeros(16_000, np.float32), np.zeros(10, np.float32)):
        vector = network.embed_utterance(ge2e.preprocess(clip))
        assert vector.shape == (256,) and np.isfinite(vector).all()
