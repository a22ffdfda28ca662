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


# Where the crops of crop_averaged_embedding start (s): four phases of the
# encoder's 0.77 s window step; a crop shorter than MIN_CROP_S is left out.
REFERENCE_CROPS_S = (0.0, 0.19, 0.385, 0.58)
MIN_CROP_S = 1.6


class _Embeds(Protocol):
    def embed(self, x16k: np.ndarray) -> np.ndarray: ...


def crop_averaged_embedding(encoder: _Embeds, x16k: np.ndarray) -> np.ndarray:
    """``encoder``'s embedding averaged over crops starting REFERENCE_CROPS_S
    into the audio (re-normalized): the window grid no longer decides the
    figure (pipeline.CloningPipeline.reference_embedding says why). The
    stock check and the quality report hear with it, so a voice replaced by
    a built-in has one similarity, not two."""
    audio = np.asarray(x16k, np.float32)
    crops = [
        audio[round(s * SAMPLE_RATE) :]
        for s in REFERENCE_CROPS_S
        if audio.shape[0] - round(s * SAMPLE_RATE) >= MIN_CROP_S * SAMPLE_RATE
    ]
    if len(crops) <= 1:
        return encoder.embed(audio)
    return normalize(np.mean([encoder.embed(c) for c in crops], axis=0)).astype(np.float32)
