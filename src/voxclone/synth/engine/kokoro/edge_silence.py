"""Keep the decoder from rendering the silence Kokoro puts around every chunk.

Kokoro gives the boundary token before a chunk ~16 frames (0.4 s) and the one
after a chunk cut mid-sentence 6-11 frames; the decoder renders them as
silence that ``synth/audio/join.py`` then trims. The vocoder is ~96 % of a
call's time and follows the frame count, so a stream's first chunk ("The old
bridge", 13 tokens) spent about half its time on silence: 1.95 s of audio, of
which 0.95 s silent (measured 2026-12-02 on 2 cores).

The edit crops the decoder's three inputs (aligned text features, F0 and
energy curves) to at most ``keep`` frames of each boundary token; everything
before the decoder still sees the full sequence. Capping the durations
themselves was tried first and broke the first word ("The old bridge" heard
as "On bridge", WER 3.6 % -> 40 % at 2 frames): the prosody predictor's
frame-level LSTM needs the lead-in. With the crop, ``studies/edge_silence.py``
(16 texts x 2 voices streamed, Whisper tiny.en; docs/benchmarks.md "Edge
silence"):

    frames kept   WER     encoder cos to "off"   loudness   all streams
    off           3.1 %   1                      0          95.1 s
    2             4.1 %   0.982 (min 0.955)      -0.9 dB    82.0 s
    4             2.9 %   0.987 (min 0.971)      -0.8 dB    83.3 s
    8             3.1 %   0.991 (min 0.980)      -0.5 dB    86.8 s

The decoder normalizes over time (AdaIN), so it hears a little less silence
and the voice shifts slightly; 4 frames (100 ms) keeps the WER, and streams
took 12 % less time (first audio 15 % sooner). ``DEFAULT_KEEP_FRAMES`` is that
choice.
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

DEFAULT_KEEP_FRAMES = 4
# The decoder's inputs in the Kokoro v1.0 export: aligned text features
# [1, C, F] (MatMul with the alignment matrix), F0 and energy [1, 2F].
ALIGNED_FEATURES = "/encoder/MatMul_1_output_0"
F0_CURVE = "/encoder/Reshape_output_0"
ENERGY_CURVE = "/encoder/Reshape_1_output_0"
DECODER_PREFIX = "/decoder/"
_PREFIX = "edge_crop/"


def crop_decoder_input(graph: Any, frames: str, keep: int) -> str | None:
    """Edit ``graph`` (an ``onnx.GraphProto``) so the decoder sees at most
    ``keep`` frames of each boundary token, ``frames`` being the per-token
    frame counts [1, T + 2]. Returns the name of the counts the audio now
    follows, or None (graph unchanged) when this export is not the expected one."""
    import onnx
    from onnx import helper, numpy_helper

    if keep < 1:
        raise ValueError("keep must be at least 1 frame")
    producers = {out: node for node in graph.node for out in node.output}
    expected = {ALIGNED_FEATURES: "MatMul", F0_CURVE: "Reshape", ENERGY_CURVE: "Reshape"}
    for name, op in expected.items():
        producer = producers.get(name)
        if producer is None or producer.op_type != op or not _only_decoder_reads(graph, name):
            log.warning("Kokoro graph differs from the v1.0 export; edge silence kept")
            return None

    def p(name: str) -> str:
        return _PREFIX + name

    def const(name: str, value: Any) -> None:
        graph.initializer.append(numpy_helper.from_array(np.array(value), p(name)))

    for name, value in (
        ("keep", np.float32(keep)),
        ("zero", np.float32(0.0)),
        ("first", [0]),
        ("second", [1]),
        ("last", [-1]),
        ("end", [np.iinfo(np.int64).max]),
        ("axis1", [1]),
        ("axis2", [2]),
        ("one_dim", [1]),
        ("two", [2]),
        ("after_frames_dim", [3]),
    ):
        const(name, value)

    for name in expected:
        producers[name].output[list(producers[name].output).index(name)] = p(name + "/full")

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> Any:
        return helper.make_node(op, inputs, [output], name=output, **attrs)

    # cut = max(count - keep, 0) at each end, as int64 [1]
    def cut(end: str, start: str, stop: str) -> list[Any]:
        return [
            node("Slice", [frames, p(start), p(stop), p("axis1")], p(end + "/count")),
            node("Sub", [p(end + "/count"), p("keep")], p(end + "/over")),
            node("Max", [p(end + "/over"), p("zero")], p(end + "/cut_f")),
            node("Cast", [p(end + "/cut_f")], p(end + "/cut_2d"), to=onnx.TensorProto.INT64),
            node("Reshape", [p(end + "/cut_2d"), p("one_dim")], p(end + "/cut")),
        ]

    full = p(ALIGNED_FEATURES + "/full")
    nodes = [
        *cut("lead", "first", "second"),
        *cut("trail", "last", "end"),
        node("Shape", [full], p("shape")),
        node("Slice", [p("shape"), p("axis2"), p("after_frames_dim")], p("total")),
        node("Sub", [p("total"), p("trail/cut")], p("stop")),
        node("Slice", [full, p("lead/cut"), p("stop"), p("axis2")], ALIGNED_FEATURES),
        node("Mul", [p("lead/cut"), p("two")], p("lead/cut_x2")),
        node("Mul", [p("stop"), p("two")], p("stop_x2")),
        node(
            "Slice", [p(F0_CURVE + "/full"), p("lead/cut_x2"), p("stop_x2"), p("axis1")], F0_CURVE
        ),
        node(
            "Slice",
            [p(ENERGY_CURVE + "/full"), p("lead/cut_x2"), p("stop_x2"), p("axis1")],
            ENERGY_CURVE,
        ),
        # The counts the audio follows: both boundary counts capped at keep.
        node("Min", [frames, p("keep")], p("capped")),
        node("Slice", [p("capped"), p("first"), p("second"), p("axis1")], p("lead/kept")),
        node("Slice", [frames, p("second"), p("last"), p("axis1")], p("inner")),
        node("Slice", [p("capped"), p("last"), p("end"), p("axis1")], p("trail/kept")),
        node("Concat", [p("lead/kept"), p("inner"), p("trail/kept")], p("frames"), axis=1),
    ]
    graph.node.extend(nodes)
    sort_topologically(graph)
    return p("frames")


def _only_decoder_reads(graph: Any, name: str) -> bool:
    """Every reader of ``name`` is the decoder or its input quantization."""
    readers = [node for node in graph.node if name in node.input]
    return bool(readers) and all(
        node.name.startswith(DECODER_PREFIX) or node.output[0].startswith(name) for node in readers
    )


def sort_topologically(graph: Any) -> None:
    """Reorder ``graph.node`` so each node follows its inputs' producers
    (ONNX requires it); nodes already in order keep their relative order."""
    nodes = list(graph.node)
    producer = {out: i for i, node in enumerate(nodes) for out in node.output}
    waiting = [0] * len(nodes)
    readers: dict[int, list[int]] = defaultdict(list)
    for i, node in enumerate(nodes):
        for name in set(node.input):
            j = producer.get(name)
            if j is not None and j != i:
                waiting[i] += 1
                readers[j].append(i)
    ready = deque(i for i, count in enumerate(waiting) if count == 0)
    order: list[int] = []
    while ready:
        i = ready.popleft()
        order.append(i)
        for k in readers[i]:
            waiting[k] -= 1
            if waiting[k] == 0:
                ready.append(k)
    if len(order) != len(nodes):
        raise ValueError("the edited Kokoro graph has a cycle")
    del graph.node[:]
    graph.node.extend(nodes[i] for i in order)
