"""The differentiable Kokoro (synth/engine/kokoro/torch_model.py) renders what
the shipped ONNX engine renders: same tokens, style and speed -> the same
per-token durations (within one frame on a few tokens) and, on the ONNX
engine's durations, a log-mel spectrogram within 3.5 dB mean absolute difference
(measured 2.4 dB here, 3.05 dB on studies/deep_refine_parity.py's sentence,
where another voice is 9.9 dB away; the ONNX graph also quantizes activations to 8 bits, the copy
computes them in float32, so equality is not expected) and far closer than the
same sentence in another voice. Gradients reach both halves of the style.

Marked slow and models: it builds the copy from the real model (~25 s on an
idle 2-core host, more under load)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the differentiable Kokoro needs torch ([deep] extra)")
librosa = pytest.importorskip("librosa", reason="the parity check measures log-mel with librosa")

from installed_models import INSTALLED_MODELS  # noqa: E402
from voxclone.errors import ModelAssetError  # noqa: E402
from voxclone.synth.engine.kokoro import durations  # noqa: E402
from voxclone.synth.engine.kokoro.assets import assemble_model, load_packs, load_vocab  # noqa: E402
from voxclone.synth.engine.kokoro.engine import style_row  # noqa: E402
from voxclone.synth.engine.kokoro.torch_model import build_torch_kokoro  # noqa: E402
from voxclone.synth.text.g2p_router import MultiG2P  # noqa: E402

pytestmark = [pytest.mark.models, pytest.mark.slow]

SENTENCE = "Hello there, my friend."
MEL_TOLERANCE_DB = 3.5


def _log_mel(audio: np.ndarray) -> np.ndarray:
    mel = librosa.feature.melspectrogram(y=audio, sr=24_000, n_fft=1024, hop_length=240, n_mels=80)
    return np.asarray(10 * np.log10(np.maximum(mel, 1e-10)))


def _mel_distance(a: np.ndarray, b: np.ndarray) -> float:
    n = min(a.size, b.size)
    ma, mb = _log_mel(a[:n]), _log_mel(b[:n])
    floor = ma.max() - 80.0  # an 80 dB range: silence's digits are not the voice
    return float(np.abs(np.maximum(ma, floor) - np.maximum(mb, floor)).mean())


@pytest.fixture(scope="module")
def copy_and_onnx() -> tuple[object, object, dict[str, int]]:
    model_path = assemble_model(INSTALLED_MODELS, verify_existing=False)
    vocab = load_vocab()
    try:
        copy = build_torch_kokoro(model_path, vocab)
    except ModelAssetError as exc:  # the model code is not installed
        pytest.skip(str(exc))
    import onnxruntime as ort

    # The shipped graph plus its frames-per-token output (the engine's own
    # edit for word timestamps, edges as exported): changes no computation.
    graph = durations.edited_graph(model_path, edge_frames=None)
    assert graph is not None
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    return copy, session, vocab


def _onnx(
    session: object, tokens: tuple[int, ...], style: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    audio, frames = session.run(  # type: ignore[attr-defined]
        ["audio", durations.DURATION_OUTPUT],
        {
            "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
            "style": style.reshape(1, 256),
            "speed": np.array([1.0], dtype=np.float32),
        },
    )
    return np.asarray(audio, dtype=np.float32).ravel(), np.asarray(frames).ravel().astype(np.int64)


def test_every_exported_tensor_is_mapped(
    copy_and_onnx: tuple[object, object, dict[str, int]],
) -> None:
    copy = copy_and_onnx[0]
    report = copy.report  # type: ignore[attr-defined]
    # 688 tensors in KModel: 546 from the file, 140 InstanceNorm affine pairs
    # (identity, never exported) and ALBERT's unused pooler.
    assert report.mapped == 546
    assert len(report.unmapped_torch) == 142
    assert all(
        k.endswith((".norm.weight", ".norm.bias")) or k.startswith("bert.pooler.")
        for k in report.unmapped_torch
    )


def test_same_durations_and_spectrogram_as_the_onnx_engine(
    copy_and_onnx: tuple[object, object, dict[str, int]],
) -> None:
    copy, session, vocab = copy_and_onnx
    g2p = MultiG2P(vocab)
    tokens = g2p.token_ids(g2p.phonemize(SENTENCE, "en-us"))
    packs = load_packs()
    names = sorted(packs)
    style = style_row(packs[names[0]], len(tokens))
    other = style_row(packs[names[-1]], len(tokens))

    onnx_audio, onnx_frames = _onnx(session, tokens, style)
    with torch.no_grad():
        free = copy.render(tokens, torch.from_numpy(style))  # type: ignore[attr-defined]
    # Durations: the copy predicts the engine's frames per token, give or take
    # one frame on a token whose count sits on a rounding edge.
    diff = np.abs(free.frames.numpy() - onnx_frames)
    assert diff.max() <= 1 and int((diff > 0).sum()) <= max(1, len(tokens) // 10), diff

    # The spectrogram on the engine's durations, so the frames align.
    frames = torch.from_numpy(onnx_frames)
    with torch.no_grad():
        forced = copy.render(tokens, torch.from_numpy(style), frames=frames)  # type: ignore[attr-defined]
        voice_b = copy.render(tokens, torch.from_numpy(other), frames=frames)  # type: ignore[attr-defined]
    parity = _mel_distance(onnx_audio, forced.audio.numpy())
    another_voice = _mel_distance(onnx_audio, voice_b.audio.numpy())
    assert parity <= MEL_TOLERANCE_DB, parity
    assert parity < 0.6 * another_voice, (parity, another_voice)


def test_gradients_reach_the_style(copy_and_onnx: tuple[object, object, dict[str, int]]) -> None:
    copy, _, vocab = copy_and_onnx
    g2p = MultiG2P(vocab)
    tokens = g2p.token_ids(g2p.phonemize("Hi.", "en-us"))
    style = torch.from_numpy(style_row(next(iter(load_packs().values())), len(tokens)).copy())
    style.requires_grad_(True)
    out = copy.render(tokens, style)  # type: ignore[attr-defined]
    (out.audio**2).mean().backward()
    assert style.grad is not None
    assert float(style.grad[:128].abs().sum()) > 0  # timbre half: the decoder's AdaIN
    assert float(style.grad[128:].abs().sum()) > 0  # prosody half: F0 and energy


def test_the_timbre_search_split_renders_what_render_renders(
    copy_and_onnx: tuple[object, object, dict[str, int]],
) -> None:
    """The deep refine computes the decoder's inputs once per sentence and
    decodes each step's timbre: that must be the same audio as a whole render,
    and its gradient must reach the timbre half."""
    copy, _, vocab = copy_and_onnx
    g2p = MultiG2P(vocab)
    tokens = g2p.token_ids(g2p.phonemize("Hi there.", "en-us"))
    style = torch.from_numpy(style_row(next(iter(load_packs().values())), len(tokens)).copy())
    with torch.no_grad():
        whole = copy.render(tokens, style)  # type: ignore[attr-defined]
        inputs = copy.decoder_inputs(tokens, style)  # type: ignore[attr-defined]
    timbre = style[:128].clone().requires_grad_(True)
    split = copy.decode(inputs, timbre)  # type: ignore[attr-defined]
    assert torch.equal(inputs.frames, whole.frames)
    assert torch.allclose(split.detach(), whole.audio, atol=1e-5)
    (split**2).mean().backward()
    assert timbre.grad is not None and float(timbre.grad.abs().sum()) > 0
