"""The speaker encoder's real weights against resemblyzer's, and its ONNX graph built in a
child process (with the helpers of test_ge2e.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from test_ge2e import (  # tests/unit (conftest.py)
    _clips,
    _speech_like,
)

from voxclone.synth.voice import ge2e
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder


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


def test_a_damaged_saved_graph_is_built_again(tmp_path: Path) -> None:
    path = ge2e.saved_graph(tmp_path)
    path.write_bytes(b"not an onnx graph")
    network = ge2e.Ge2eNetwork.load(tmp_path)
    assert network.embed_utterance(_speech_like(2.0, 1)).shape == (256,)
    assert path.read_bytes()[:4] != b"not "


def test_the_encoder_imports_neither_torch_nor_onnx(tmp_path: Path) -> None:
    """Importing torch (and onnx) held the GIL for seconds while speech was
    served: the graph is built once in a child process and then only read."""
    import subprocess

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
