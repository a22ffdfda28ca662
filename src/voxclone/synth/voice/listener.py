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

from voxclone.synth.voice.campplus import CamPlusPlus
from voxclone.synth.voice.campplus_weights import installed_weights, verify_weights
from voxclone.synth.voice.encoder import EmbeddingCacheLike, SpeakerEncoder, normalize

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


class CampplusListener:
    """CAM++ in NumPy; the weights load (and their hash is checked) on first use."""

    name = CAMPLUS
    dims = 192

    def __init__(self, weights: Path, *, cache: EmbeddingCacheLike | None = None) -> None:
        self._weights = weights
        self._cache = cache
        self._model: CamPlusPlus | None = None
        self._lock = threading.Lock()

    def load(self) -> CamPlusPlus:
        with self._lock:
            if self._model is None:
                verify_weights(self._weights)
                self._model = CamPlusPlus.from_file(self._weights)
            return self._model

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
            return CampplusListener(weights, cache=cache)
        log.warning(
            "CAM++ listener weights not installed under %s (make listener-weights): "
            "listening with GE2E",
            models_dir,
        )
    return Ge2eListener(ge2e)
