"""PerthNet's convolution stacks as ONNX graphs, run by ONNX Runtime on one thread.

Why not NumPy (measured 2026-12-06, 2-core host at load 13-14, CPU time by
``time.process_time``, /tmp-free script in bench/watermark.py's ``cost``):
the encoder on a 0.5 s stream chunk (50 frames) cost 37.5 ms of CPU through
NumPy's OpenBLAS (its threads spin on both cores for a small product) and
3.9 ms with OpenBLAS held to one thread, against 2.3 ms in ONNX Runtime's
Conv on one thread; on 9.85 s of speech 203 ms (NumPy, default threads) vs
42 ms (ORT). NumPy's thread count is process-wide, so it cannot be held to
one thread for the watermark alone; an ORT session takes its own, and stays
beside the engine's workers instead of fighting them.

Four stacks of seven 1-D convolutions (LeakyReLU 0.01 after all but the
last): the encoder (one graph) and the decoder's fast, normal and slow
branches (one graph of three inputs; each branch has its own time length).
Built with the ``onnx`` helper from the shipped weights once (in a child
process: importing onnx holds the GIL for about a second) and saved under
the models directory, named by the weights' hash and GRAPH_VERSION, 0600
with its SHA-256 recorded beside it (synth/built_models.py), as the GE2E and
CAM++ graphs are.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from voxclone.errors import ModelAssetError
from voxclone.synth import built_models
from voxclone.synth.files import sha256_file

GRAPH_VERSION = "v1"  # in the saved files' names: a change to build_onnx never reuses old copies
BUILD_TIMEOUT_S = 180.0
LAYERS = 7
LEAKY_SLOPE = 0.01  # torch.nn.LeakyReLU's default

ENCODER = ("encoder.layers",)
# PerTh's time scales 0.75, 1.0, 1.25 (synth/audio/watermark.py feeds them in this order).
DECODER = ("decoder.fast_layers", "decoder.normal_layers", "decoder.slow_layers")
PARTS = {"encoder": ENCODER, "decoder": DECODER}


def build_onnx(state: dict[str, np.ndarray], prefixes: tuple[str, ...]) -> bytes:
    """One graph running each stack in ``prefixes``: input ``x{i}`` (1, C, T_i)
    -> output ``y{i}`` (1, C', T_i), 'same' zero padding as torch's Conv1d."""
    import onnx  # only here: importing it costs ~1 s, most of it holding the GIL
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers, inputs, outputs = [], [], [], []
    for s, prefix in enumerate(prefixes):
        source = f"x{s}"
        first = state.get(f"{prefix}.0.conv.weight")
        if first is None:
            raise ModelAssetError(f"the watermark weights lack {prefix}")
        inputs.append(
            helper.make_tensor_value_info(source, TensorProto.FLOAT, [1, first.shape[1], f"t{s}"])
        )
        for i in range(LAYERS):
            try:
                weight = state[f"{prefix}.{i}.conv.weight"].astype(np.float32)
                bias = state[f"{prefix}.{i}.conv.bias"].astype(np.float32)
            except KeyError as exc:
                raise ModelAssetError(f"the watermark weights lack {prefix}.{i}") from exc
            w_name, b_name = f"s{s}_w{i}", f"s{s}_b{i}"
            initializers += [
                numpy_helper.from_array(weight, w_name),
                numpy_helper.from_array(bias, b_name),
            ]
            width = int(weight.shape[2])
            last = i == LAYERS - 1
            conv = f"y{s}" if last else f"s{s}_c{i}"
            nodes.append(
                helper.make_node(
                    "Conv",
                    [source, w_name, b_name],
                    [conv],
                    kernel_shape=[width],
                    pads=[width // 2, width // 2],
                )
            )
            if last:
                outputs.append(
                    helper.make_tensor_value_info(
                        conv, TensorProto.FLOAT, [1, int(weight.shape[0]), f"t{s}"]
                    )
                )
            else:
                source = f"s{s}_a{i}"
                nodes.append(helper.make_node("LeakyRelu", [conv], [source], alpha=LEAKY_SLOPE))
    graph = helper.make_graph(nodes, "perth_net", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by every onnxruntime this project allows
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def saved_graph(models_dir: Path, weights: Path, part: str) -> Path:
    digest = sha256_file(weights)[:20]
    return models_dir / "watermark" / f"perth-{digest}-{part}-{GRAPH_VERSION}.onnx"


def _read_state(weights: Path) -> dict[str, np.ndarray]:
    from voxclone.synth.voice.torch_zip import read_state_dict

    return read_state_dict(weights, inside="model")


def write_graphs(weights: Path, models_dir: Path) -> None:
    """Build both graphs from ``weights`` and save them (atomically: several builders may race)."""
    state = _read_state(weights)
    for part, prefixes in PARTS.items():
        built_models.save(saved_graph(models_dir, weights, part), build_onnx(state, prefixes))


def onnx_models(weights: Path, models_dir: Path | None) -> dict[str, bytes]:
    """The encoder and decoder graphs: saved ones when they pass their hash
    check, else built in a child process (in memory when ``models_dir`` is None)."""

    def build() -> dict[str, bytes]:
        state = _read_state(weights)
        return {part: build_onnx(state, prefixes) for part, prefixes in PARTS.items()}

    if models_dir is None:
        return build()
    paths = {part: saved_graph(models_dir, weights, part) for part in PARTS}
    return built_models.built_once(
        paths,
        "watermark graphs",
        [__name__, str(weights), str(models_dir)],
        build,
        timeout_s=BUILD_TIMEOUT_S,
    )


class StackSession:
    """One graph in ONNX Runtime on one thread: (C, T_i) arrays in, out."""

    def __init__(self, model: bytes) -> None:
        self._session = built_models.cpu_session(model, "watermark graph")
        self._inputs = [i.name for i in self._session.get_inputs()]

    def __call__(self, *xs: np.ndarray) -> list[np.ndarray]:
        feeds = {
            name: np.ascontiguousarray(x, dtype=np.float32)[None]
            for name, x in zip(self._inputs, xs, strict=True)
        }
        return [np.asarray(y[0], dtype=np.float32) for y in self._session.run(None, feeds)]


if __name__ == "__main__":  # python -m voxclone.synth.audio.watermark_graph WEIGHTS MODELS_DIR
    write_graphs(Path(sys.argv[1]), Path(sys.argv[2]))
