"""Speaker listeners: one small interface over the embedding models that judge
"does this sound like that person" inside the product.

Two are available: GE2E (resemblyzer's d-vector, 256-d, always installed) and
CAM++ (3D-Speaker, 192-d, weights fetched at install by
``scripts/fetch_listener.py``). Cloning code asks :func:`make_listener` for one
by name and gets L2-normalized vectors and cosine similarities; which one it
asks for is the cloning code's choice. Asking for CAM++ where its weights are
not installed gives GE2E, with one warning line saying so.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path
from typing import Protocol

import numpy as np
import soxr

from voxclone.errors import ModelAssetError
from voxclone.synth.voice.campplus import CamPlusPlus
from voxclone.synth.voice.campplus_onnx import CampplusSession, build_onnx, onnx_model
from voxclone.synth.voice.campplus_weights import installed_weights, verify_weights
from voxclone.synth.voice.speaker_encoder import EmbeddingCacheLike, SpeakerEncoder, normalize
from voxclone.synth.voice.torch_zip import read_state_dict

log = logging.getLogger(__name__)

LISTENER_RATE = 16_000
GE2E = "ge2e"
CAMPLUS = "campplus"
NAMES = (GE2E, CAMPLUS)


class SpeakerListener(Protocol):
    name: str
    dims: int

    def embed(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        """L2-normalized embedding of mono float audio at ``sample_rate``."""
        ...

    def similarity(self, a: np.ndarray, b: np.ndarray) -> float:
        """Cosine of two embeddings from this listener."""
        ...


def _to_16k(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    x = np.ascontiguousarray(np.asarray(audio, dtype=np.float32).ravel())
    if sample_rate != LISTENER_RATE:
        x = soxr.resample(x, sample_rate, LISTENER_RATE).astype(np.float32)
    return x


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(normalize(a), normalize(b)))


class Ge2eListener:
    name = GE2E
    dims = 256

    def __init__(self, encoder: SpeakerEncoder) -> None:
        self.encoder = encoder

    def embed(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        return self.encoder.embed(_to_16k(audio, sample_rate))

    def similarity(self, a: np.ndarray, b: np.ndarray) -> float:
        return _cosine(a, b)


class _Embedder(Protocol):
    def embed(self, x16k: np.ndarray) -> np.ndarray: ...


class CampplusListener:
    """CAM++ in ONNX Runtime on one thread (NumPy if the graph cannot be built);
    the weights' hash is checked and the model loaded on first use."""

    name = CAMPLUS
    dims = 192

    def __init__(
        self,
        weights: Path,
        *,
        models_dir: Path | None = None,
        cache: EmbeddingCacheLike | None = None,
    ) -> None:
        self._weights = weights
        self._models_dir = models_dir
        self._cache = cache
        self._model: _Embedder | None = None
        self._lock = threading.Lock()

    def load(self) -> _Embedder:
        with self._lock:
            if self._model is None:
                verify_weights(self._weights)
                self._model = self._build()
            return self._model

    def _build(self) -> _Embedder:
        try:
            if self._models_dir is None:
                return CampplusSession(build_onnx(read_state_dict(self._weights)))
            return CampplusSession(onnx_model(self._weights, self._models_dir))
        except (ModelAssetError, ImportError, OSError):
            log.warning("CAM++ graph unavailable: running the NumPy network", exc_info=True)
            return CamPlusPlus.from_file(self._weights)

    def embed(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        x = _to_16k(audio, sample_rate)
        key = "campplus:" + hashlib.sha256(x.tobytes()).hexdigest()
        if self._cache is not None:
            hit = self._cache.get(key)
            if hit is not None:
                return np.asarray(hit, dtype=np.float32)
        vector = normalize(self.load().embed(x))
        if self._cache is not None:
            self._cache.put(key, vector)
        return vector

    def similarity(self, a: np.ndarray, b: np.ndarray) -> float:
        return _cosine(a, b)


def make_listener(
    name: str,
    *,
    models_dir: Path | None,
    encoder: SpeakerEncoder | None = None,
    cache: EmbeddingCacheLike | None = None,
) -> SpeakerListener:
    """The listener called ``name``; CAM++ without installed weights gives GE2E.
    ``encoder``: the process's GE2E encoder, shared rather than loaded twice."""
    if name not in NAMES:
        raise ValueError(f"listener must be one of {NAMES}, not {name!r}")
    ge2e = encoder if encoder is not None else SpeakerEncoder(cache=cache, models_dir=models_dir)
    if name == CAMPLUS:
        weights = installed_weights(models_dir)
        if weights is not None:
            return CampplusListener(weights, models_dir=models_dir, cache=cache)
        log.warning(
            "CAM++ listener weights not installed under %s (make listener-weights): "
            "listening with GE2E",
            models_dir,
        )
    return Ge2eListener(ge2e)
