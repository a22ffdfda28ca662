"""CAM++ as an ONNX graph, built from the state dict, run by ONNX Runtime.

The NumPy network (:mod:`voxclone.synth.voice.campplus`) is the readable
definition; this is the same computation for serving: ONNX Runtime ran it
with ~45 % less CPU than NumPy's BLAS on this machine and, unlike NumPy,
takes a thread count per session, so the listener stays on one thread beside
the synthesis workers instead of spinning BLAS threads on every core.

Batch norms that follow a convolution are folded into it; the pre-activation
batch norms of the dense layers stay BatchNormalization nodes. The graph is
built once (``scripts/fetch_listener.py`` at install, else in a child process
on first use: importing onnx holds the GIL for about a second) and saved
under the models directory, named by the weights' hash and GRAPH_VERSION,
0600 with its SHA-256 recorded beside it; a saved graph that fails that check
is discarded and built again, never loaded (synth/built_models.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from voxclone.synth import built_models
from voxclone.synth.voice.campplus import (
    BLOCKS,
    BN_EPS,
    EMBED_DIMS,
    HEAD_CHANNELS,
    MIN_SAMPLES,
    SEGMENT,
    check_state,
)
from voxclone.synth.voice.campplus_weights import WEIGHTS_SHA256
from voxclone.synth.voice.fbank import N_MELS, mean_normalized_fbank
from voxclone.synth.voice.torch_zip import read_state_dict

GRAPH_VERSION = "v1"  # in the saved file's name: a change to build_onnx never reuses old copies
BUILD_TIMEOUT_S = 180.0


def saved_graph(models_dir: Path) -> Path:
    return models_dir / "campplus" / f"campplus-{WEIGHTS_SHA256[:20]}-{GRAPH_VERSION}.onnx"


def _bn_affine(state: dict[str, np.ndarray], prefix: str) -> tuple[np.ndarray, np.ndarray]:
    inv = 1.0 / np.sqrt(state[f"{prefix}.running_var"].astype(np.float64) + BN_EPS)
    weight = state.get(f"{prefix}.weight")
    bias = state.get(f"{prefix}.bias")
    scale = inv * (weight.astype(np.float64) if weight is not None else 1.0)
    shift = (bias.astype(np.float64) if bias is not None else 0.0) - state[
        f"{prefix}.running_mean"
    ].astype(np.float64) * scale
    return scale, np.asarray(shift, dtype=np.float64)


class _Builder:
    def __init__(self, state: dict[str, np.ndarray]) -> None:
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.state = state
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, array: np.ndarray, hint: str = "c") -> str:
        name = self.name(hint)
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, kind: str, inputs: list[str], **attrs: Any) -> str:
        out = self.name(kind.lower())
        self.nodes.append(self.helper.make_node(kind, inputs, [out], **attrs))
        return out

    def conv_bn(self, x: str, weight: str, bn: str | None, *, relu: bool, **attrs: Any) -> str:
        """Convolution (no bias) with the following batch norm folded in."""
        w = self.state[weight].astype(np.float64)
        inputs = [x]
        if bn is None:
            inputs.append(self.const(w.astype(np.float32), "w"))
        else:
            scale, shift = _bn_affine(self.state, bn)
            folded = w * scale.reshape((-1,) + (1,) * (w.ndim - 1))
            inputs += [
                self.const(folded.astype(np.float32), "w"),
                self.const(shift.astype(np.float32), "b"),
            ]
        y = self.op("Conv", inputs, **attrs)
        return self.op("Relu", [y]) if relu else y

    def bn_relu(self, x: str, prefix: str) -> str:
        s = self.state
        c = s[f"{prefix}.running_mean"].shape[0]
        weight = s.get(f"{prefix}.weight", np.ones(c, np.float32))
        bias = s.get(f"{prefix}.bias", np.zeros(c, np.float32))
        args = [weight, bias, s[f"{prefix}.running_mean"], s[f"{prefix}.running_var"]]
        names = [self.const(a.astype(np.float32), "bn") for a in args]
        y = self.op("BatchNormalization", [x, *names], epsilon=BN_EPS)
        return self.op("Relu", [y])


def build_onnx(state: dict[str, np.ndarray]) -> bytes:
    """feats [T, 80] (mean-normalized log filterbanks) -> embedding [192]."""
    import onnx
    from onnx import TensorProto, helper

    check_state(state)
    g = _Builder(state)
    i64 = lambda *v: g.const(np.array(v, dtype=np.int64), "i")  # noqa: E731
    x = g.op("Transpose", ["feats"], perm=[1, 0])
    x = g.op("Unsqueeze", [x, i64(0, 1)])  # [1, 1, 80, T]
    pad1 = {"pads": [1, 1, 1, 1], "kernel_shape": [3, 3]}
    x = g.conv_bn(x, "head.conv1.weight", "head.bn1", relu=True, **pad1)
    for stage in ("layer1", "layer2"):
        for block in (0, 1):
            p = f"head.{stage}.{block}"
            strides = [2, 1] if block == 0 else [1, 1]
            y = g.conv_bn(x, f"{p}.conv1.weight", f"{p}.bn1", relu=True, strides=strides, **pad1)
            y = g.conv_bn(y, f"{p}.conv2.weight", f"{p}.bn2", relu=False, **pad1)
            if block == 0:
                x = g.conv_bn(
                    x, f"{p}.shortcut.0.weight", f"{p}.shortcut.1", relu=False, strides=strides
                )
            x = g.op("Relu", [g.op("Add", [y, x])])
    x = g.conv_bn(x, "head.conv2.weight", "head.bn2", relu=True, strides=[2, 1], **pad1)
    x = g.op("Reshape", [x, i64(1, HEAD_CHANNELS * (N_MELS // 8), -1)])  # [1, 320, T], (c, f)
    x = g.conv_bn(
        x, "xvector.tdnn.linear.weight", "xvector.tdnn.nonlinear.batchnorm",
        relu=True, strides=[2], pads=[2, 2],
    )  # fmt: skip
    for b, (layers, kernel, dilation) in enumerate(BLOCKS, start=1):
        for i in range(layers):
            p = f"xvector.block{b}.tdnnd{i + 1}"
            h = g.bn_relu(x, f"{p}.nonlinear1.batchnorm")
            h = g.conv_bn(h, f"{p}.linear1.weight", f"{p}.nonlinear2.batchnorm", relu=True)
            c = f"{p}.cam_layer"
            pad = (kernel - 1) // 2 * dilation
            local = g.conv_bn(
                h,
                f"{c}.linear_local.weight",
                None,
                relu=False,
                dilations=[dilation],
                pads=[pad, pad],
            )
            segments = g.op(
                "AveragePool", [h], kernel_shape=[SEGMENT], strides=[SEGMENT], ceil_mode=1
            )
            context = g.op("Add", [g.op("ReduceMean", [h], axes=[2], keepdims=1), segments])
            w1 = state[f"{c}.linear1.weight"]
            hidden = g.op("Conv", [context, g.const(w1, "w"), g.const(state[f"{c}.linear1.bias"])])
            hidden = g.op("Relu", [hidden])
            w2 = state[f"{c}.linear2.weight"]
            gates = g.op("Conv", [hidden, g.const(w2, "w"), g.const(state[f"{c}.linear2.bias"])])
            gates = g.op("Sigmoid", [gates])  # [1, 32, segments]
            gates = g.op("Unsqueeze", [gates, i64(3)])
            gates = g.op("Expand", [gates, i64(1, 1, 1, SEGMENT)])
            gates = g.op("Reshape", [gates, i64(0, 0, -1)])
            frames = g.op("Shape", [local], start=2, end=3)
            gates = g.op("Slice", [gates, i64(0), frames, i64(2)])
            x = g.op("Concat", [x, g.op("Mul", [local, gates])], axis=1)
        x = g.bn_relu(x, f"xvector.transit{b}.nonlinear.batchnorm")
        x = g.conv_bn(x, f"xvector.transit{b}.linear.weight", None, relu=False)
    x = g.bn_relu(x, "xvector.out_nonlinear.batchnorm")
    mean = g.op("ReduceMean", [x], axes=[2], keepdims=1)
    centred = g.op("Sub", [x, mean])
    squares = g.op("ReduceSum", [g.op("Mul", [centred, centred]), i64(2)], keepdims=0)
    frames = g.op("Cast", [g.op("Shape", [x], start=2, end=3)], to=TensorProto.FLOAT)
    dof = g.op("Max", [g.op("Sub", [frames, g.const(np.array([1.0], np.float32))]),
                       g.const(np.array([1.0], np.float32))])  # fmt: skip
    std = g.op("Sqrt", [g.op("Div", [squares, dof])])
    stats = g.op("Concat", [g.op("Squeeze", [mean, i64(2)]), std], axis=1)  # [1, 1024]
    scale, shift = _bn_affine(state, "xvector.dense.nonlinear.batchnorm")
    dense = state["xvector.dense.linear.weight"][:, :, 0].astype(np.float64) * scale[:, None]
    emb = g.op(
        "Gemm",
        [stats, g.const(dense.astype(np.float32), "w"), g.const(shift.astype(np.float32), "b")],
        transB=1,
    )
    g.nodes.append(helper.make_node("Reshape", [emb, i64(-1)], ["embedding"]))
    graph = helper.make_graph(
        g.nodes,
        "campplus",
        [helper.make_tensor_value_info("feats", TensorProto.FLOAT, ["frames", N_MELS])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [EMBED_DIMS])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def write_graph(weights: Path, path: Path) -> None:
    """Build from ``weights`` and save to ``path`` atomically."""
    built_models.save(path, build_onnx(read_state_dict(weights)))  # several builders may race


def onnx_model(weights: Path, models_dir: Path) -> bytes:
    """The saved graph, built in a child process first when it is missing."""
    path = saved_graph(models_dir)
    return built_models.built_once(
        {"graph": path},
        "CAM++ graph",
        [__name__, str(weights), str(path)],
        lambda: {"graph": build_onnx(read_state_dict(weights))},
        timeout_s=BUILD_TIMEOUT_S,
    )["graph"]


class CampplusSession:
    """The graph in ONNX Runtime, one thread (as the GE2E encoder)."""

    def __init__(self, model: bytes, *, threads: int = 1) -> None:
        self._session = built_models.cpu_session(model, "CAM++ graph", threads=threads)

    def forward(self, feats: np.ndarray) -> np.ndarray:
        out = self._session.run(None, {"feats": np.ascontiguousarray(feats, dtype=np.float32)})
        return np.asarray(out[0], dtype=np.float32)

    def embed(self, x16k: np.ndarray) -> np.ndarray:
        """Raw 192-d embedding (the same contract as CamPlusPlus.embed)."""
        audio = np.asarray(x16k, dtype=np.float32).ravel()
        if audio.size == 0:
            raise ValueError("CAM++ needs some audio")
        if audio.size < MIN_SAMPLES:
            audio = np.tile(audio, -(-MIN_SAMPLES // audio.size))
        return self.forward(mean_normalized_fbank(audio))


if __name__ == "__main__":  # python -m voxclone.synth.voice.campplus_onnx WEIGHTS OUT
    write_graph(Path(sys.argv[1]), Path(sys.argv[2]))
