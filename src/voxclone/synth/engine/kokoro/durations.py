"""Kokoro's per-token durations, exposed as a second graph output.

Kokoro predicts how many frames each input token lasts (duration predictor →
``Round`` → ``Clip(min=1)``) and expands the encoder states with those counts
before the decoder; each frame is 600 samples at 24 kHz, so the audio is
exactly ``sum(frames) * 600`` samples long (checked by tests/unit/
test_word_timestamps.py). The exported graph only outputs ``audio``; adding the
counts to the outputs changes no weight and no computation (the tensor is
computed anyway), so word timestamps cost one small copy per call. The same
edit pass crops the silence at a chunk's edges (edge_silence.py); the output
then holds the boundary tokens' counts as rendered.
"""

from __future__ import annotations

import logging
from pathlib import Path

from voxclone.synth.engine.kokoro import edge_silence

log = logging.getLogger(__name__)

# The tensor the alignment matrix is built from: frames per token, boundary
# tokens included, float32 [1, T + 2].
DURATION_TENSOR = "/encoder/Clip_output_0"
# The graph output added here: the frame counts the audio follows (after the
# edge-silence crop, the boundary tokens' counts as rendered).
DURATION_OUTPUT = "frames_per_token"
HOP_SAMPLES = 600  # audio samples per duration frame (24 kHz)


def graph_variant(edge_frames: int | None) -> str:
    """Goes into the optimized-graph cache key: a copy built with other edits
    (no duration output, another crop) must not be reused."""
    crop = "full-edges" if edge_frames is None else f"edges-{edge_frames}"
    return f"durations-v2:{crop}"


def edited_graph(model_path: Path, *, edge_frames: int | None) -> bytes | None:
    """The model with the duration counts added as an output and, unless
    ``edge_frames`` is None, the decoder cropped to that many frames of each
    boundary token (edge_silence.py); None when this graph has no duration
    tensor (another export): synthesis then works as shipped, without timestamps."""
    try:
        import onnx
    except ImportError:  # synthesis needs only onnxruntime; timestamps need onnx too
        log.warning("the onnx package is missing; word timestamps unavailable")
        return None
    model = onnx.load(str(model_path))
    graph = model.graph
    producers = [n for n in graph.node if DURATION_TENSOR in n.output]
    if len(producers) != 1 or producers[0].op_type != "Clip":
        log.warning("Kokoro graph has no duration tensor; word timestamps unavailable")
        return None
    followed: str | None = None
    if edge_frames is not None:
        followed = edge_silence.crop_decoder_input(graph, DURATION_TENSOR, edge_frames)
    graph.node.append(
        onnx.helper.make_node(
            "Identity", [followed or DURATION_TENSOR], [DURATION_OUTPUT], name=DURATION_OUTPUT
        )
    )
    graph.output.append(onnx.ValueInfoProto(name=DURATION_OUTPUT))
    return bytes(model.SerializeToString())
