"""Speaker encoder: resemblyzer's GE2E d-vector (256-d), the product encoder.

Computed by :mod:`voxclone.synth.voice.ge2e` from resemblyzer's shipped
weights without importing torch. Loaded lazily (read weights, open an ONNX
Runtime session: ~0.1 s once the graph is saved under ``models_dir``) and
guarded by a lock so concurrent requests load it once. Embeddings can be
cached by content hash through an injected cache object (synth must not
depend on the runtime layer, so the cache comes in through the constructor).
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from voxclone.synth.voice.ge2e import Ge2eNetwork, preprocess

SAMPLE_RATE = 16_000
EMBED_DIMS = 256


class EmbeddingCacheLike(Protocol):
    def get(self, key: str) -> np.ndarray | None: ...

    def put(self, key: str, value: np.ndarray) -> object: ...


class SpeakerEncoder:
    def __init__(
        self, *, cache: EmbeddingCacheLike | None = None, models_dir: Path | None = None
    ) -> None:
        """``models_dir``: where the encoder's ONNX graph is saved after its first
        build (None: built in memory at every load)."""
        self._cache = cache
        self._models_dir = models_dir
        self._model: Ge2eNetwork | None = None
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            self._model = Ge2eNetwork.load(self._models_dir)

    def embed(self, x16k: np.ndarray) -> np.ndarray:
        """L2-normalized 256-d embedding of 16 kHz mono float audio."""
        audio = np.ascontiguousarray(np.asarray(x16k, dtype=np.float32).ravel())
        key = "ge2e:" + hashlib.sha256(audio.tobytes()).hexdigest()
        if self._cache is not None:
            hit = self._cache.get(key)
            if hit is not None:
                return np.asarray(hit, dtype=np.float32)
        vector = self._compute(audio)
        if self._cache is not None:
            self._cache.put(key, vector)
        return vector

    def embed_many(self, clips: list[np.ndarray]) -> np.ndarray:
        """Mean of per-clip embeddings, re-normalized (one voice, several clips)."""
        vectors = np.stack([self.embed(c) for c in clips])
        return normalize(vectors.mean(axis=0))

    def _compute(self, audio: np.ndarray) -> np.ndarray:
        self.load()
        assert self._model is not None
        # Trimming that leaves almost nothing gives the raw clip back.
        vector = self._model.embed_utterance(preprocess(audio))
        return normalize(np.asarray(vector, dtype=np.float32))


def normalize(vector: np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(normalize(a), normalize(b)))
