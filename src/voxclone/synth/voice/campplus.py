"""CAM++ speaker embeddings (3D-Speaker, Wang et al. 2023) in NumPy, without torch.

The network, from the paper's description and the shape of the shipped
weights (``campplus_cn_en_common.pt``, 6.85 M parameters, trained on Chinese
and English speakers):

- a 2-D convolutional front (32 channels, 3x3 kernels, two stages of two
  residual blocks, each stage halving the frequency axis, then a last
  frequency-halving convolution) turns [80 bins, T frames] into 320 channels;
- a time-delay layer (kernel 5, stride 2) makes 128 channels at half the
  frame rate;
- three densely connected blocks (12, 24 and 16 layers, kernel 3, dilation
  1, 2, 2), each layer BN-ReLU, a 1x1 bottleneck to 128, BN-ReLU, then a
  context-aware masked convolution adding 32 channels: the convolution's
  output is gated by a sigmoid of the clip mean plus 100-frame segment means
  passed through a small two-layer network; a BN-ReLU-1x1 transition halves
  the channels after each block (512 at the end);
- BN-ReLU, mean and (unbiased) standard deviation over time, a 1x1 to 192
  dimensions and a parameter-free batch norm.

All batch norms are inference-time affine maps from their running statistics
(eps 1e-5). Convolutions are im2col matrix products in float32, in column
chunks so a long clip never builds a large temporary. The weights are read by
:mod:`voxclone.synth.voice.torch_zip` and checked against the exact list of
names and shapes this architecture needs (:func:`parameter_shapes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voxclone.errors import ModelAssetError
from voxclone.synth.voice.fbank import N_MELS, SAMPLE_RATE, mean_normalized_fbank
from voxclone.synth.voice.torch_zip import read_state_dict

EMBED_DIMS = 192
HEAD_CHANNELS = 32
INIT_CHANNELS = 128
GROWTH = 32
BOTTLENECK = 128
BLOCKS = ((12, 3, 1), (24, 3, 2), (16, 3, 2))  # (layers, kernel, dilation)
SEGMENT = 100  # frames per context segment of the masked convolutions
BN_EPS = 1e-5
STD_EPS = 1e-2  # the standard deviation of a single frame
MIN_SAMPLES = SAMPLE_RATE // 2  # shorter clips are tiled up to 0.5 s
CHUNK_COLUMNS = 16_384  # im2col columns per matrix product


# -- architecture ----------------------------------------------------------------------
def _bn(prefix: str, channels: int, *, affine: bool = True) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    if affine:
        out[f"{prefix}.weight"] = (channels,)
        out[f"{prefix}.bias"] = (channels,)
    out[f"{prefix}.running_mean"] = (channels,)
    out[f"{prefix}.running_var"] = (channels,)
    out[f"{prefix}.num_batches_tracked"] = ()
    return out


def parameter_shapes(feat_dim: int = N_MELS) -> dict[str, tuple[int, ...]]:
    """Every tensor name of the state dict and its shape."""
    c = HEAD_CHANNELS
    s: dict[str, tuple[int, ...]] = {"head.conv1.weight": (c, 1, 3, 3), **_bn("head.bn1", c)}
    for stage in ("layer1", "layer2"):
        for block in (0, 1):
            p = f"head.{stage}.{block}"
            s[f"{p}.conv1.weight"] = (c, c, 3, 3)
            s.update(_bn(f"{p}.bn1", c))
            s[f"{p}.conv2.weight"] = (c, c, 3, 3)
            s.update(_bn(f"{p}.bn2", c))
            if block == 0:  # the stride-2 block's shortcut is a strided 1x1
                s[f"{p}.shortcut.0.weight"] = (c, c, 1, 1)
                s.update(_bn(f"{p}.shortcut.1", c))
    s["head.conv2.weight"] = (c, c, 3, 3)
    s.update(_bn("head.bn2", c))
    channels = c * (feat_dim // 8)
    s["xvector.tdnn.linear.weight"] = (INIT_CHANNELS, channels, 5)
    s.update(_bn("xvector.tdnn.nonlinear.batchnorm", INIT_CHANNELS))
    channels = INIT_CHANNELS
    for b, (layers, kernel, _dilation) in enumerate(BLOCKS, start=1):
        for i in range(layers):
            p = f"xvector.block{b}.tdnnd{i + 1}"
            width = channels + i * GROWTH
            s.update(_bn(f"{p}.nonlinear1.batchnorm", width))
            s[f"{p}.linear1.weight"] = (BOTTLENECK, width, 1)
            s.update(_bn(f"{p}.nonlinear2.batchnorm", BOTTLENECK))
            s[f"{p}.cam_layer.linear_local.weight"] = (GROWTH, BOTTLENECK, kernel)
            s[f"{p}.cam_layer.linear1.weight"] = (BOTTLENECK // 2, BOTTLENECK, 1)
            s[f"{p}.cam_layer.linear1.bias"] = (BOTTLENECK // 2,)
            s[f"{p}.cam_layer.linear2.weight"] = (GROWTH, BOTTLENECK // 2, 1)
            s[f"{p}.cam_layer.linear2.bias"] = (GROWTH,)
        channels += layers * GROWTH
        s.update(_bn(f"xvector.transit{b}.nonlinear.batchnorm", channels))
        s[f"xvector.transit{b}.linear.weight"] = (channels // 2, channels, 1)
        channels //= 2
    s.update(_bn("xvector.out_nonlinear.batchnorm", channels))
    s["xvector.dense.linear.weight"] = (EMBED_DIMS, channels * 2, 1)
    s.update(_bn("xvector.dense.nonlinear.batchnorm", EMBED_DIMS, affine=False))
    return s


def check_state(state: dict[str, np.ndarray], feat_dim: int = N_MELS) -> None:
    """Refuse weights that are not exactly this architecture's."""
    expected = parameter_shapes(feat_dim)
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise ModelAssetError(
            f"CAM++ weights do not match the architecture (missing {missing[:3]}, "
            f"unexpected {extra[:3]})"
        )
    for name, shape in expected.items():
        if tuple(state[name].shape) != shape:
            raise ModelAssetError(f"CAM++ weight {name} has shape {state[name].shape}, not {shape}")


# -- layers ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Affine:
    """An inference batch norm: x * scale + shift, per channel (axis 0)."""

    scale: np.ndarray
    shift: np.ndarray

    def __call__(self, x: np.ndarray, *, relu: bool = True) -> np.ndarray:
        shape = (-1,) + (1,) * (x.ndim - 1)
        y = x * self.scale.reshape(shape) + self.shift.reshape(shape)
        return np.maximum(y, 0, out=y) if relu else y


def _affine(state: dict[str, np.ndarray], prefix: str) -> _Affine:
    inv = 1.0 / np.sqrt(state[f"{prefix}.running_var"].astype(np.float64) + BN_EPS)
    weight = state.get(f"{prefix}.weight")
    bias = state.get(f"{prefix}.bias")
    gain = inv * (weight.astype(np.float64) if weight is not None else 1.0)
    offset = (bias.astype(np.float64) if bias is not None else 0.0) - state[
        f"{prefix}.running_mean"
    ] * gain
    return _Affine(gain.astype(np.float32), np.asarray(offset, dtype=np.float32))


def conv2d_3x3(x: np.ndarray, weight: np.ndarray, stride_f: int) -> np.ndarray:
    """[C, F, T] -> [O, F', T]: 3x3 kernel, padding 1, stride ``stride_f`` along F."""
    channels, freq, frames = x.shape
    out_f = (freq - 1) // stride_f + 1
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    matrix = weight.reshape(weight.shape[0], -1)  # [O, C*9], (c, kh, kw) order
    out = np.empty((weight.shape[0], out_f, frames), dtype=np.float32)
    step = max(1, CHUNK_COLUMNS // out_f)
    for t0 in range(0, frames, step):
        t1 = min(frames, t0 + step)
        cols = np.empty((channels, 3, 3, out_f, t1 - t0), dtype=np.float32)
        for kh in range(3):
            rows = padded[:, kh : kh + stride_f * (out_f - 1) + 1 : stride_f]
            for kw in range(3):
                cols[:, kh, kw] = rows[:, :, t0 + kw : t1 + kw]
        out[:, :, t0:t1] = (matrix @ cols.reshape(channels * 9, -1)).reshape(-1, out_f, t1 - t0)
    return out


def conv1d(
    x: np.ndarray, weight: np.ndarray, *, stride: int = 1, dilation: int = 1, padding: int = 0
) -> np.ndarray:
    """[C, T] -> [O, T']: weight [O, C, K], zero padding on both sides."""
    out_c, channels, kernel = weight.shape
    if kernel == 1 and stride == 1 and padding == 0:
        return weight[:, :, 0] @ x
    padded = np.pad(x, ((0, 0), (padding, padding))) if padding else x
    span = dilation * (kernel - 1) + 1
    frames = (padded.shape[1] - span) // stride + 1
    cols = np.empty((channels, kernel, frames), dtype=np.float32)
    for k in range(kernel):
        start = k * dilation
        cols[:, k] = padded[:, start : start + stride * (frames - 1) + 1 : stride]
    return weight.reshape(out_c, -1) @ cols.reshape(channels * kernel, frames)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow warnings for large |x|


# -- network ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _ResBlock:
    """Two 3x3 convolutions with a residual; the first may stride along F."""

    stride: int
    conv1: np.ndarray
    bn1: _Affine
    conv2: np.ndarray
    bn2: _Affine
    proj: np.ndarray | None  # [O, C] 1x1 shortcut of a strided block
    proj_bn: _Affine | None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = self.bn1(conv2d_3x3(x, self.conv1, self.stride))
        y = self.bn2(conv2d_3x3(y, self.conv2, 1), relu=False)
        if self.proj is None or self.proj_bn is None:
            y += x
        else:
            strided = np.ascontiguousarray(x[:, :: self.stride])
            channels, freq, frames = strided.shape
            shortcut = (self.proj @ strided.reshape(channels, -1)).reshape(-1, freq, frames)
            y += self.proj_bn(shortcut, relu=False)
        return np.maximum(y, 0, out=y)


@dataclass(frozen=True)
class _DenseLayer:
    bn1: _Affine
    bottleneck: np.ndarray  # [128, C]
    bn2: _Affine
    local: np.ndarray  # [32, 128, K]
    dilation: int
    ctx1: np.ndarray  # [64, 128]
    ctx1_bias: np.ndarray
    ctx2: np.ndarray  # [32, 64]
    ctx2_bias: np.ndarray

    def __call__(self, x: np.ndarray) -> np.ndarray:
        h = self.bn2(self.bottleneck @ self.bn1(x))
        pad = (self.local.shape[2] - 1) // 2 * self.dilation
        local = conv1d(h, self.local, dilation=self.dilation, padding=pad)
        frames = h.shape[1]
        # Context: the clip mean plus the mean of the frame's 100-frame segment
        # (the last segment averages the frames it has).
        starts = np.arange(0, frames, SEGMENT)
        sums = np.add.reduceat(h, starts, axis=1)
        counts = np.minimum(SEGMENT, frames - starts).astype(np.float32)
        context = sums / counts + h.mean(axis=1, keepdims=True)
        hidden = np.maximum(self.ctx1 @ context + self.ctx1_bias[:, None], 0)
        gates = _sigmoid(self.ctx2 @ hidden + self.ctx2_bias[:, None])
        return local * np.repeat(gates, SEGMENT, axis=1)[:, :frames]


class CamPlusPlus:
    """The CAM++ network with fixed weights; :meth:`embed` takes 16 kHz audio."""

    def __init__(self, state: dict[str, np.ndarray], *, final_relu: bool = False) -> None:
        """``final_relu``: apply a ReLU to the embedding (one published port does;
        the 3D-Speaker original does not, and it measures better:
        bench/listener_eer.py)."""
        check_state(state)
        st = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in state.items()}
        self.final_relu = final_relu
        self._head_conv1 = st["head.conv1.weight"]
        self._head_bn1 = _affine(st, "head.bn1")
        self._res: list[_ResBlock] = []
        for stage in ("layer1", "layer2"):
            for block in (0, 1):
                p = f"head.{stage}.{block}"
                first = block == 0  # strided, with a projected shortcut
                self._res.append(
                    _ResBlock(
                        stride=2 if first else 1,
                        conv1=st[f"{p}.conv1.weight"],
                        bn1=_affine(st, f"{p}.bn1"),
                        conv2=st[f"{p}.conv2.weight"],
                        bn2=_affine(st, f"{p}.bn2"),
                        proj=st[f"{p}.shortcut.0.weight"][:, :, 0, 0] if first else None,
                        proj_bn=_affine(st, f"{p}.shortcut.1") if first else None,
                    )
                )
        self._head_conv2 = st["head.conv2.weight"]
        self._head_bn2 = _affine(st, "head.bn2")
        self._tdnn = st["xvector.tdnn.linear.weight"]
        self._tdnn_bn = _affine(st, "xvector.tdnn.nonlinear.batchnorm")
        self._blocks: list[tuple[list[_DenseLayer], _Affine, np.ndarray]] = []
        for b, (layers, _kernel, dilation) in enumerate(BLOCKS, start=1):
            dense = []
            for i in range(layers):
                p = f"xvector.block{b}.tdnnd{i + 1}"
                dense.append(
                    _DenseLayer(
                        bn1=_affine(st, f"{p}.nonlinear1.batchnorm"),
                        bottleneck=np.ascontiguousarray(st[f"{p}.linear1.weight"][:, :, 0]),
                        bn2=_affine(st, f"{p}.nonlinear2.batchnorm"),
                        local=st[f"{p}.cam_layer.linear_local.weight"],
                        dilation=dilation,
                        ctx1=np.ascontiguousarray(st[f"{p}.cam_layer.linear1.weight"][:, :, 0]),
                        ctx1_bias=st[f"{p}.cam_layer.linear1.bias"],
                        ctx2=np.ascontiguousarray(st[f"{p}.cam_layer.linear2.weight"][:, :, 0]),
                        ctx2_bias=st[f"{p}.cam_layer.linear2.bias"],
                    )
                )
            transit = (
                _affine(st, f"xvector.transit{b}.nonlinear.batchnorm"),
                np.ascontiguousarray(st[f"xvector.transit{b}.linear.weight"][:, :, 0]),
            )
            self._blocks.append((dense, *transit))
        self._out_bn = _affine(st, "xvector.out_nonlinear.batchnorm")
        self._dense = np.ascontiguousarray(st["xvector.dense.linear.weight"][:, :, 0])
        self._dense_bn = _affine(st, "xvector.dense.nonlinear.batchnorm")

    @classmethod
    def from_file(cls, path: Path, *, final_relu: bool = False) -> CamPlusPlus:
        return cls(read_state_dict(path), final_relu=final_relu)

    def head(self, feats: np.ndarray) -> np.ndarray:
        """[T, 80] features -> [320, T] channels."""
        x = np.ascontiguousarray(feats.T[None], dtype=np.float32)
        x = self._head_bn1(conv2d_3x3(x, self._head_conv1, 1))
        for block in self._res:
            x = block(x)
        x = self._head_bn2(conv2d_3x3(x, self._head_conv2, 2))
        return x.reshape(-1, x.shape[2])

    def forward(self, feats: np.ndarray) -> np.ndarray:
        """[T, 80] mean-normalized log filterbanks -> raw 192-d embedding."""
        if feats.ndim != 2 or feats.shape[1] != N_MELS or feats.shape[0] < 1:
            raise ValueError(f"CAM++ takes [frames, {N_MELS}] features, not {feats.shape}")
        x = self.head(feats)
        x = self._tdnn_bn(conv1d(x, self._tdnn, stride=2, padding=2))
        for dense, transit_bn, transit in self._blocks:
            width = x.shape[0] + len(dense) * GROWTH
            buf = np.empty((width, x.shape[1]), dtype=np.float32)
            buf[: x.shape[0]] = x
            filled = x.shape[0]
            for layer in dense:
                buf[filled : filled + GROWTH] = layer(buf[:filled])
                filled += GROWTH
            x = transit @ transit_bn(buf)
        x = self._out_bn(x)
        mean = x.mean(axis=1)
        std = x.std(axis=1, ddof=1) if x.shape[1] > 1 else np.full_like(mean, STD_EPS)
        emb = self._dense_bn(self._dense @ np.concatenate([mean, std]), relu=self.final_relu)
        return np.asarray(emb, dtype=np.float32)

    def embed(self, x16k: np.ndarray) -> np.ndarray:
        """Raw (not normalized) 192-d embedding of 16 kHz mono float audio."""
        audio = np.asarray(x16k, dtype=np.float32).ravel()
        if audio.size == 0:
            raise ValueError("CAM++ needs some audio")
        if audio.size < MIN_SAMPLES:  # a few frames give no usable statistics
            audio = np.tile(audio, -(-MIN_SAMPLES // audio.size))
        return self.forward(mean_normalized_fbank(audio))
