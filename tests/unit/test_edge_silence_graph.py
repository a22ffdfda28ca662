"""The Kokoro graph edits on small graphs: the edge-silence option, an export
the crop does not recognize (left as it is, the durations still exposed), and
the topological order of the edited graph. No model is loaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from voxclone.synth.engine.kokoro import durations, edge_frames, edge_silence


def test_edge_silence_option() -> None:
    assert edge_frames(None) == edge_silence.DEFAULT_KEEP_FRAMES
    assert edge_frames("6") == 6
    assert edge_frames(" Off ") is None and edge_frames("0") is None
    for bad in ("-1", "two", "1.5", ""):
        with pytest.raises(ValueError, match="edge_silence_frames"):
            edge_frames(bad)


def test_variants_do_not_share_an_optimized_graph() -> None:
    names = {durations.graph_variant(frames) for frames in (None, 2, 4)}
    assert len(names) == 3


def _clip_only_graph(path: Path) -> None:
    """Frames per token through a Clip, as Kokoro has, and nothing else."""
    clip = helper.make_node("Clip", ["x", "low"], [durations.DURATION_TENSOR], name="/encoder/Clip")
    double = helper.make_node("Add", [durations.DURATION_TENSOR, "x"], ["audio"])
    graph = helper.make_graph(
        [clip, double],
        "not-kokoro",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None])],
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, None])],
        [helper.make_tensor("low", TensorProto.FLOAT, [], [1.0])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_an_unknown_export_keeps_its_edges_and_still_gives_durations(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "other.onnx"
    _clip_only_graph(path)
    edited = durations.edited_graph(path, edge_frames=4)
    assert edited is not None
    assert "differs from the v1.0 export" in caplog.text
    session = ort.InferenceSession(edited, providers=["CPUExecutionProvider"])
    x = np.array([[0.0, 3.0, 20.0]], dtype=np.float32)
    audio, frames = session.run(["audio", durations.DURATION_OUTPUT], {"x": x})
    assert frames.tolist() == [[1.0, 3.0, 20.0]]  # uncropped
    assert audio.tolist() == [[1.0, 6.0, 40.0]]


def test_nodes_are_put_after_the_nodes_they_read() -> None:
    nodes = [
        helper.make_node("Neg", ["b"], ["c"], name="reads-b"),
        helper.make_node("Neg", ["a"], ["b"], name="makes-b"),
        helper.make_node("Neg", ["c"], ["d"], name="reads-c"),
    ]
    graph = helper.make_graph(
        nodes,
        "unordered",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("d", TensorProto.FLOAT, [1])],
    )
    edge_silence.sort_topologically(graph)
    assert [n.name for n in graph.node] == ["makes-b", "reads-b", "reads-c"]
    onnx.checker.check_graph(graph)
