"""The product speaker encoder without torch: resemblyzer's GE2E d-vector.

Resemblyzer runs its 3-layer LSTM in torch, and a server that loaded it
imported torch (1-4 s on 2 cores, much of it in C code holding the GIL): the
cloning models were ready seconds after speech, and streams served during
that load had their first audio 0.2-0.3 s later (studies/second_request.py).
The network is small (1.4 M weights), so here the same computation runs from
the weights resemblyzer ships: the same preprocessing (volume normalization,
webrtcvad silence trimming), mel frames, 1.6 s windows and LSTM, the LSTM as
an ONNX graph in ONNX Runtime (already loaded for Kokoro). Embeddings match
resemblyzer's to a cosine of 0.99999 (tests/integration/test_ge2e_graph.py), so the atlas,
whose embeddings were measured with resemblyzer, stays valid.

The weights are read from resemblyzer's ``pretrained.pt`` (torch's legacy
serialization: pickles, then raw storages) by a restricted unpickler that
builds NumPy arrays and accepts nothing but tensors and dicts.
"""

from __future__ import annotations

import importlib.util
import pickle
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from voxclone.errors import ModelAssetError
from voxclone.synth import built_models
from voxclone.synth.asset_packages import missing
from voxclone.synth.files import sha256_file

SAMPLE_RATE = 16_000
# In the saved graph's file name: a change to build_onnx must not reuse old copies.
GRAPH_VERSION = "v1"
BUILD_TIMEOUT_S = 120.0  # a child building the graph (~1.5 s on 2 cores)
MEL_WINDOW = 400  # 25 ms
MEL_HOP = 160  # 10 ms
MEL_CHANNELS = 40
PARTIAL_FRAMES = 160  # 1.6 s windows, averaged into the utterance embedding
PARTIAL_RATE = 1.3  # windows per second of audio (resemblyzer's default)
MIN_COVERAGE = 0.75  # a last window at least this full is kept, zero-padded
VAD_WINDOW = 480  # 30 ms at 16 kHz
VAD_AVERAGE_WIDTH = 8
VAD_MAX_SILENCE = 6
TARGET_DBFS = -30.0
INT16_MAX = 2**15 - 1

# torch's legacy serialization: the pickles' magic number and protocol.
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001
_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
}


def shipped_weights() -> Path:
    """resemblyzer's ``pretrained.pt``, found without importing resemblyzer
    (its ``__init__`` imports torch, which serving does not install: the
    package comes without its dependencies, synth/asset_packages.py)."""
    spec = importlib.util.find_spec("resemblyzer")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    path = Path(locations[0]) / "pretrained.pt" if locations else None
    if path is None or not path.is_file():
        raise ModelAssetError(missing("the speaker encoder (resemblyzer's pretrained.pt)"))
    return path


# -- weights -------------------------------------------------------------------------
@dataclass
class _Storage:
    key: str
    dtype: type
    data: np.ndarray | None = None


@dataclass
class _TensorRef:
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    def array(self) -> np.ndarray:
        assert self.storage.data is not None
        data = self.storage.data
        item = data.itemsize
        view = np.lib.stride_tricks.as_strided(
            data[self.offset :],
            shape=self.shape,
            strides=tuple(s * item for s in self.strides),
            writeable=False,
        )
        return np.array(view)  # owns its memory, contiguous


class _StateDict(dict):  # type: ignore[type-arg]
    """An OrderedDict in the pickle; torch sets ``_metadata`` on it."""


class _StorageType:
    def __init__(self, dtype: type) -> None:
        self.dtype = dtype


def _rebuild_tensor(
    storage: _Storage, offset: int, shape: Any, strides: Any, *_: Any
) -> _TensorRef:
    return _TensorRef(storage, int(offset), tuple(shape), tuple(strides))


class _LegacyUnpickler(pickle.Unpickler):
    """Only what a state dict holds: tensors, (ordered) dicts, plain values."""

    def __init__(self, stream: BinaryIO, storages: dict[str, _Storage]) -> None:
        super().__init__(stream)
        self._storages = storages

    def find_class(self, module: str, name: str) -> Any:
        if module == "collections" and name == "OrderedDict":
            return _StateDict
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        raise pickle.UnpicklingError(f"unexpected object in the weights: {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        # ('storage', storage type, key, location, element count[, view])
        if not isinstance(pid, tuple) or pid[0] != "storage" or len(pid) < 5:
            raise pickle.UnpicklingError("unexpected persistent id in the weights")
        kind, key = pid[1], str(pid[2])
        if not isinstance(kind, _StorageType):
            raise pickle.UnpicklingError("unexpected storage type in the weights")
        return self._storages.setdefault(key, _Storage(key, kind.dtype))


def read_legacy_state(path: Path, entry: str = "model_state") -> dict[str, np.ndarray]:
    """The tensors of ``checkpoint[entry]`` in a torch legacy-format file."""
    storages: dict[str, _Storage] = {}
    try:
        with path.open("rb") as stream:
            plain = pickle.Unpickler  # the header pickles hold only numbers and a dict
            if plain(stream).load() != _LEGACY_MAGIC:
                raise ModelAssetError("the speaker encoder weights are not a torch legacy file")
            if plain(stream).load() != _LEGACY_PROTOCOL:
                raise ModelAssetError("the speaker encoder weights have an unknown protocol")
            plain(stream).load()  # system info
            checkpoint = _LegacyUnpickler(stream, storages).load()
            keys = plain(stream).load()
            for key in keys:
                (count,) = struct.unpack("<q", stream.read(8))
                storage = storages.get(str(key))
                dtype = np.dtype(storage.dtype if storage is not None else np.uint8)
                raw = stream.read(count * dtype.itemsize)
                if len(raw) != count * dtype.itemsize:
                    raise ModelAssetError("the speaker encoder weights are truncated")
                if storage is not None:
                    storage.data = np.frombuffer(raw, dtype=dtype.newbyteorder("<"))
    except (OSError, pickle.UnpicklingError, EOFError, struct.error) as exc:
        raise ModelAssetError("the speaker encoder weights could not be read") from exc
    state = checkpoint.get(entry) if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict):
        raise ModelAssetError("the speaker encoder weights hold no model state")
    return {name: ref.array() for name, ref in state.items() if isinstance(ref, _TensorRef)}


# -- audio -------------------------------------------------------------------------
def normalize_volume(wav: np.ndarray, target_dbfs: float = TARGET_DBFS) -> np.ndarray:
    """Raise (never lower) the level so the RMS is ``target_dbfs``."""
    rms = np.sqrt(np.mean((wav * INT16_MAX) ** 2)) if wav.size else 0.0
    if not rms > 0:  # silence: resemblyzer multiplied it by infinity (NaNs)
        return wav
    change = target_dbfs - 20 * np.log10(rms / INT16_MAX)
    if change < 0:
        return wav
    return wav * (10 ** (change / 20))


def speech_mask(wav: np.ndarray) -> np.ndarray:
    """The samples :func:`trim_long_silences` keeps: pauses longer than ~0.2 s
    dropped (webrtcvad, mode 3, 30 ms windows, smoothed over 8 windows, speech
    widened by 3 windows each side); the tail short of a window is dropped."""
    import webrtcvad  # small C extension; imported on first use

    keep = np.zeros(len(wav), dtype=bool)
    whole = len(wav) - len(wav) % VAD_WINDOW
    pcm = np.round(wav[:whole] * INT16_MAX).astype(np.int16).tobytes()
    vad = webrtcvad.Vad(3)
    step = VAD_WINDOW * 2  # bytes
    flags = np.array(
        [vad.is_speech(pcm[i : i + step], SAMPLE_RATE) for i in range(0, len(pcm), step)],
        dtype=np.float64,
    )
    if flags.size == 0:
        keep[:whole] = True
        return keep
    width = VAD_AVERAGE_WIDTH
    padded = np.concatenate((np.zeros((width - 1) // 2), flags, np.zeros(width // 2)))
    sums = np.cumsum(padded)
    sums[width:] = sums[width:] - sums[:-width]
    voiced = np.round(sums[width - 1 :] / width).astype(bool)
    # A dilation by VAD_MAX_SILENCE + 1 windows, centred (3 on each side).
    reach = np.ones(VAD_MAX_SILENCE + 1)
    widened = np.convolve(voiced.astype(np.float64), reach, mode="same") > 0.5
    keep[:whole] = np.repeat(widened, VAD_WINDOW)
    return keep


def trim_long_silences(wav: np.ndarray) -> np.ndarray:
    """``wav`` without its long pauses (:func:`speech_mask`)."""
    return wav[speech_mask(wav)]


def preprocess(audio: np.ndarray) -> np.ndarray:
    """Volume-normalized and silence-trimmed; the raw clip when trimming
    leaves under 0.25 s."""
    wav = trim_long_silences(normalize_volume(audio))
    return wav if wav.size >= SAMPLE_RATE // 4 else audio


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear to 1 kHz, logarithmic above."""
    hz = np.asarray(hz, np.float64)
    linear = hz / (200.0 / 3)
    log_part = 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(hz >= 1000.0, log_part, linear)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, np.float64)
    linear = mel * (200.0 / 3)
    log_part = 1000.0 * np.exp((np.log(6.4) / 27.0) * (mel - 15.0))
    return np.where(mel >= 15.0, log_part, linear)


def mel_basis(n_fft: int = MEL_WINDOW, n_mels: int = MEL_CHANNELS) -> np.ndarray:
    """Triangular, area-normalized (Slaney) filters from 0 Hz to Nyquist."""
    bins = np.fft.rfftfreq(n_fft, 1.0 / SAMPLE_RATE)
    top = float(_hz_to_mel(np.array(SAMPLE_RATE / 2.0)))
    edges = _mel_to_hz(np.linspace(0.0, top, n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - bins[None, :]
    rising = -ramps[:-2] / widths[:-1, None]
    falling = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(rising, falling))
    weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return weights.astype(np.float32)


_WINDOW = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(MEL_WINDOW) / MEL_WINDOW)).astype(np.float32)


def mel_frames(wav: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """(frames, 40) power mel spectrogram: centred, zero-padded 25 ms Hann
    frames every 10 ms (not log-compressed: the network was trained so)."""
    half = MEL_WINDOW // 2
    padded = np.pad(np.asarray(wav, np.float32), (half, half))
    count = 1 + (len(padded) - MEL_WINDOW) // MEL_HOP
    frames = np.lib.stride_tricks.as_strided(
        padded,
        shape=(count, MEL_WINDOW),
        strides=(padded.strides[0] * MEL_HOP, padded.strides[0]),
        writeable=False,
    )
    spectrum = np.fft.rfft(frames * _WINDOW, axis=1)
    power = (spectrum.real**2 + spectrum.imag**2).astype(np.float32)
    return power @ basis.T


def partial_windows(n_samples: int) -> list[slice]:
    """Mel-frame ranges of the 1.6 s windows that cover an utterance."""
    n_frames = int(np.ceil((n_samples + 1) / MEL_HOP))
    step = int(np.round((SAMPLE_RATE / PARTIAL_RATE) / MEL_HOP))
    starts = range(0, max(1, n_frames - PARTIAL_FRAMES + step + 1), step)
    windows = [slice(s, s + PARTIAL_FRAMES) for s in starts]
    last = windows[-1]
    coverage = (n_samples - last.start * MEL_HOP) / (PARTIAL_FRAMES * MEL_HOP)
    if coverage < MIN_COVERAGE and len(windows) > 1:
        windows.pop()
    return windows


# -- network -------------------------------------------------------------------------
def _torch_to_onnx_gates(matrix: np.ndarray) -> np.ndarray:
    """torch stacks the LSTM gates (input, forget, cell, output); ONNX
    (input, output, forget, cell)."""
    i, f, g, o = np.split(np.asarray(matrix, np.float32), 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


def build_onnx(state: dict[str, np.ndarray]) -> bytes:
    """The network as an ONNX graph: three LSTM nodes, the linear layer, ReLU.

    ONNX Runtime's LSTM ran it as fast as torch's (8 / 21 / 44 ms for 1 / 3 /
    10 windows against 12 / 23 / 47 ms, one thread each, same run), while a
    NumPy loop over the 160 steps took 2.5x torch's time on 10 windows.
    """
    import onnx  # only here: importing it costs ~1 s, most of it holding the GIL
    from onnx import TensorProto, helper, numpy_helper

    initializers, nodes, source = [], [], "mels"
    try:
        for layer in range(3):
            weights = {
                f"W{layer}": _torch_to_onnx_gates(state[f"lstm.weight_ih_l{layer}"])[None],
                f"R{layer}": _torch_to_onnx_gates(state[f"lstm.weight_hh_l{layer}"])[None],
                f"B{layer}": np.concatenate(
                    [
                        _torch_to_onnx_gates(state[f"lstm.bias_ih_l{layer}"]),
                        _torch_to_onnx_gates(state[f"lstm.bias_hh_l{layer}"]),
                    ]
                )[None],
            }
            hidden_size = int(weights[f"R{layer}"].shape[2])
            initializers += [numpy_helper.from_array(a, n) for n, a in weights.items()]
            outputs = [f"Y{layer}", f"H{layer}"]
            nodes.append(
                helper.make_node("LSTM", [source, *weights], outputs, hidden_size=hidden_size)
            )
            # (steps, directions=1, windows, hidden) -> (steps, windows, hidden)
            squeezed = f"S{layer}"
            axis = "axis_steps" if layer < 2 else "axis_directions"
            nodes.append(
                helper.make_node("Squeeze", [outputs[0 if layer < 2 else 1], axis], [squeezed])
            )
            source = squeezed
        initializers += [
            numpy_helper.from_array(np.array([1], np.int64), "axis_steps"),
            numpy_helper.from_array(np.array([0], np.int64), "axis_directions"),
            numpy_helper.from_array(state["linear.weight"].astype(np.float32), "linear_w"),
            numpy_helper.from_array(state["linear.bias"].astype(np.float32), "linear_b"),
        ]
    except KeyError as exc:
        raise ModelAssetError("the speaker encoder weights lack a layer") from exc
    nodes.append(helper.make_node("Gemm", [source, "linear_w", "linear_b"], ["linear"], transB=1))
    nodes.append(helper.make_node("Relu", ["linear"], ["embeddings"]))
    graph = helper.make_graph(
        nodes,
        "ge2e",
        [
            helper.make_tensor_value_info(
                "mels", TensorProto.FLOAT, ["steps", "windows", MEL_CHANNELS]
            )
        ],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["windows", 256])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by every onnxruntime this project allows
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def saved_graph(models_dir: Path) -> Path:
    """Where the graph of the shipped weights is saved."""
    return models_dir / f"ge2e-{sha256_file(shipped_weights())[:20]}-{GRAPH_VERSION}.onnx"


def onnx_model(models_dir: Path | None) -> bytes:
    """The ONNX graph of the shipped weights, saved once under ``models_dir``
    (built in memory when it is None).

    The first build runs in a child process: importing onnx holds the GIL for
    ~1 s, which a serving process would spend while it streams speech. If
    the child fails (no interpreter to spawn, say), it is built here.
    """
    if models_dir is None:
        return build_onnx(read_legacy_state(shipped_weights()))
    path = saved_graph(models_dir)
    # A saved graph that fails its recorded hash is discarded and built again.
    return built_models.built_once(
        {"graph": path},
        "speaker encoder graph",
        [__name__, str(path)],
        lambda: {"graph": build_onnx(read_legacy_state(shipped_weights()))},
        timeout_s=BUILD_TIMEOUT_S,
    )["graph"]


class Ge2eNetwork:
    """3-layer LSTM (40 -> 256), linear + ReLU on the last window state,
    L2-normalized per window; run by ONNX Runtime on one thread (several
    single-threaded workers beat intra-op threading on 2 cores)."""

    def __init__(self, model: bytes) -> None:
        self._session = built_models.cpu_session(model, "speaker encoder graph")
        self._basis = mel_basis()

    @classmethod
    def load(cls, models_dir: Path | None = None) -> Ge2eNetwork:
        try:
            return cls(onnx_model(models_dir))
        except ModelAssetError:
            if models_dir is None:
                raise
            # A damaged saved copy (a full disk, say): build it again.
            saved_graph(models_dir).unlink(missing_ok=True)
            return cls(onnx_model(models_dir))

    def forward(self, mels: np.ndarray) -> np.ndarray:
        """(windows, frames, 40) -> (windows, 256) unit vectors."""
        steps_first = np.ascontiguousarray(np.asarray(mels, np.float32).transpose(1, 0, 2))
        raw = self._session.run(None, {"mels": steps_first})[0]
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        return raw / np.maximum(norms, 1e-12)

    def embed_utterance(self, wav: np.ndarray) -> np.ndarray:
        """Mean of the windows' embeddings, L2-normalized (preprocessed audio in)."""
        windows = partial_windows(len(wav))
        needed = windows[-1].stop * MEL_HOP
        if needed >= len(wav):
            wav = np.pad(wav, (0, needed - len(wav)))
        mel = mel_frames(wav, self._basis)
        batch = np.stack([mel[w] for w in windows])
        mean = self.forward(batch).mean(axis=0)
        return (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32)


if __name__ == "__main__":  # python -m voxclone.synth.voice.ge2e PATH: what onnx_model spawns
    built_models.save(Path(sys.argv[1]), build_onnx(read_legacy_state(shipped_weights())))
