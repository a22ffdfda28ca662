"""The differentiable Kokoro (synth/engine/kokoro/torch_model.py): what it costs
and how close it renders to the shipped ONNX engine (issue 47 item 1).

One sentence (default ~2.5 s), one shipped style pack, speed 1:
  * build: seconds to build the copy from the assembled ONNX file, tensors mapped;
  * parity: per-token frames (copy's own prediction vs the engine's), and the
    mean absolute log-mel difference (80 mels, 1024/240 at 24 kHz, 80 dB
    range) on the engine's durations, beside the same distance to another
    shipped voice (the scale a voice change has);
  * cost: forward (no grad) and forward + backward (grad to the style)
    seconds with torch on 2 threads, and the process's peak RSS.

    nice -n 10 python studies/deep_refine_parity.py [--text ...]

Writes studies/results/deep_refine_parity.json. Timings depend on the host's
load: the file records the 1-minute load average at the start.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxclone.config import Settings  # noqa: E402
from voxclone.synth.engine.kokoro import durations  # noqa: E402
from voxclone.synth.engine.kokoro.assets import assemble_model, load_packs, load_vocab  # noqa: E402
from voxclone.synth.engine.kokoro.engine import style_row  # noqa: E402
from voxclone.synth.engine.kokoro.torch_model import build_torch_kokoro  # noqa: E402
from voxclone.synth.text.g2p_router import MultiG2P  # noqa: E402

MODELS = Settings().models_dir  # the product's (models_location.py)


def log_mel(audio: np.ndarray) -> np.ndarray:
    import librosa

    mel = librosa.feature.melspectrogram(y=audio, sr=24_000, n_fft=1024, hop_length=240, n_mels=80)
    return np.asarray(10 * np.log10(np.maximum(mel, 1e-10)))


def mel_distance(a: np.ndarray, b: np.ndarray) -> float:
    n = min(a.size, b.size)
    ma, mb = log_mel(a[:n]), log_mel(b[:n])
    floor = ma.max() - 80.0
    return float(np.abs(np.maximum(ma, floor) - np.maximum(mb, floor)).mean())


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--text", default="The quiet river runs past the old mill.")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "studies/results/deep_refine_parity.json"
    )
    args = parser.parse_args(argv)

    import onnxruntime as ort
    import torch

    torch.set_num_threads(2)
    load = os.getloadavg()[0]
    model_path = assemble_model(MODELS, verify_existing=False)
    vocab = load_vocab()
    g2p = MultiG2P(vocab)
    tokens = g2p.token_ids(g2p.phonemize(args.text, "en-us"))
    packs = load_packs()
    names = sorted(packs)
    style = style_row(packs[names[0]], len(tokens))
    other = style_row(packs[names[-1]], len(tokens))

    began = time.perf_counter()
    copy = build_torch_kokoro(model_path, vocab)
    build_s = time.perf_counter() - began
    rss_after_build = rss_mb()

    graph = durations.edited_graph(model_path, edge_frames=None)
    assert graph is not None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    began = time.perf_counter()
    audio, frames = session.run(
        ["audio", durations.DURATION_OUTPUT],
        {
            "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
            "style": style.reshape(1, 256),
            "speed": np.array([1.0], dtype=np.float32),
        },
    )
    onnx_s = time.perf_counter() - began
    onnx_audio = np.asarray(audio, dtype=np.float32).ravel()
    onnx_frames = np.asarray(frames).ravel().astype(np.int64)

    with torch.no_grad():
        began = time.perf_counter()
        free = copy.render(tokens, torch.from_numpy(style))
        forward_s = time.perf_counter() - began
        forced = copy.render(tokens, torch.from_numpy(style), frames=torch.from_numpy(onnx_frames))
        voice_b = copy.render(tokens, torch.from_numpy(other), frames=torch.from_numpy(onnx_frames))
    frame_diff = np.abs(free.frames.numpy() - onnx_frames)

    wanted = torch.from_numpy(style.copy()).requires_grad_(True)
    began = time.perf_counter()
    out = copy.render(tokens, wanted, frames=torch.from_numpy(onnx_frames))
    (out.audio**2).mean().backward()
    backward_s = time.perf_counter() - began
    assert wanted.grad is not None

    result = {
        "text": args.text,
        "tokens": len(tokens),
        "voice": names[0],
        "other_voice": names[-1],
        "host_load_1min": round(load, 2),
        "torch_threads": 2,
        "audio_seconds": round(onnx_audio.size / 24_000, 3),
        "build_seconds": round(build_s, 2),
        "tensors_mapped": copy.report.mapped,
        "tensors_in_kmodel": copy.report.torch_tensors,
        "tensors_left_as_built": copy.report.unmapped_torch,
        "onnx_forward_seconds": round(onnx_s, 2),
        "torch_forward_seconds": round(forward_s, 2),
        "torch_forward_backward_seconds": round(backward_s, 2),
        "peak_rss_mb_after_build": round(rss_after_build),
        "peak_rss_mb": round(rss_mb()),
        "frames_onnx": int(onnx_frames.sum()),
        "frames_copy": int(free.frames.sum()),
        "tokens_with_other_frames": int((frame_diff > 0).sum()),
        "max_frame_difference": int(frame_diff.max()),
        "log_mel_mean_abs_db_on_engine_durations": round(
            mel_distance(onnx_audio, forced.audio.numpy()), 3
        ),
        "log_mel_mean_abs_db_other_voice": round(
            mel_distance(onnx_audio, voice_b.audio.numpy()), 3
        ),
        "grad_norm_timbre": float(wanted.grad[:128].norm()),
        "grad_norm_prosody": float(wanted.grad[128:].norm()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "tensors_left_as_built"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
