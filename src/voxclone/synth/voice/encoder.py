"""Speaker encoder: resemblyzer's GE2E d-vector (256-d), the product encoder.

Loaded lazily (torch import and weights cost ~1 s) and guarded by a lock so
concurrent requests load it once. torch runs single-threaded: on the shared
2-core hosts several single-threaded workers beat intra-op threading.
Embeddings can be cached by content hash through an injected cache object
(synth must not depend on the runtime layer, so the cache comes in through
the constructor).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Protocol

import numpy as np

SAMPLE_RATE = 16_000
EMBED_DIMS = 256


class EmbeddingCacheLike(Protocol):
    def get(self, key: str) -> np.ndarray | None: ...

    def put(self, key: str, value: np.ndarray) -> object: ...


class SpeakerEncoder:
    def __init__(self, *, cache: EmbeddingCacheLike | None = None, torch_threads: int = 1) -> None:
        self._cache = cache
        self._threads = torch_threads
        self._model: Any = None
        self._lock = threading.Lock()
        self._infer_lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            import torch
            from resemblyzer import VoiceEncoder

            torch.set_num_threads(self._threads)
            self._model = VoiceEncoder(device="cpu", verbose=False)

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
        from resemblyzer import preprocess_wav

        wav = preprocess_wav(audio, source_sr=SAMPLE_RATE)
        if wav.size < SAMPLE_RATE // 4:
            # Trimming removed almost everything; embed the raw clip instead.
            wav = audio
        with self._infer_lock:  # the torch module is not re-entrant-safe for us
            vector = self._model.embed_utterance(wav)
        return normalize(np.asarray(vector, dtype=np.float32))


def normalize(vector: np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(normalize(a), normalize(b)))
