"""Kokoro's per-token durations, exposed as a second graph output.

Kokoro predicts how many frames each input token lasts (duration predictor →
``Round`` → ``Clip(min=1)``) and expands the encoder states with those counts
before the decoder; each frame is 600 samples at 24 kHz, so the audio is
exactly ``sum(frames) * 600`` samples long (checked by tests/unit/
test_word_timestamps.py). The exported graph only outputs ``audio``; adding the
clipped counts to ``graph.output`` changes no weight and no computation (the
tensor is computed anyway), so word timestamps cost one small copy per call.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

# The tensor the alignment matrix is built from: frames per token, boundary
# tokens included, float32 [1, T + 2].
DURATION_TENSOR = "/encoder/Clip_output_0"
HOP_SAMPLES = 600  # audio samples per duration frame (24 kHz)
# Goes into the optimized-graph cache key: a copy built from the plain graph
# lacks the output and must not be reused.
GRAPH_VARIANT = "durations-v1"


def with_duration_output(model_path: Path) -> bytes | None:
    """The model with the duration counts added as an output; None when this
    graph has no such tensor (another export): synthesis then works without
    timestamps."""
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
    if all(o.name != DURATION_TENSOR for o in graph.output):
        graph.output.append(onnx.ValueInfoProto(name=DURATION_TENSOR))
    return bytes(model.SerializeToString())
