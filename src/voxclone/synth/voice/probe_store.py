"""The built-in voices' probe renders, kept on disk in the models folder.

The stock check (stock_check.py) hears each built-in voice saying the quality
report's test sentence. A render is ~3 s of engine time on 2 cores, and it
depends only on the installation (the engine's weights, the sentence's tokens,
the voice's style pack), never on a user: so it is installation data, like
ONNX Runtime's optimized graph, and lives in ``Settings.models_dir`` where
every home and every process of the installation finds it. Measured
2026-12-07: a start that warms the seven earlier built-ins' probes spent
22-26 s rendering them, every start; with the files there, it reads them.
Only built-in voices' packs come here; a clone's probe is never written.

A file is named by a hash of everything the render depends on, so a changed
model, sentence or pack reads nothing stale; a file that does not load as the
audio it should be is a miss (and is written again); a folder that cannot be
written leaves the renders in memory only.
"""

from __future__ import annotations

import hashlib
import io
import logging
from pathlib import Path

import numpy as np

from voxclone.synth.files import write_atomically

log = logging.getLogger(__name__)


class StockProbeStore:
    """Probe renders by style pack, for one probe (``identity``: the engine's
    model key, the sentence's tokens and the sample rate, as text)."""

    def __init__(self, folder: Path, identity: str) -> None:
        self._folder = folder
        self._identity = identity.encode()

    def _path(self, pack: np.ndarray) -> Path:
        digest = hashlib.sha256(self._identity)
        packed = np.ascontiguousarray(pack, dtype=np.float32)
        digest.update(repr(packed.shape).encode())
        digest.update(packed.tobytes())
        return self._folder / f"{digest.hexdigest()[:40]}.npy"

    def get(self, pack: np.ndarray) -> np.ndarray | None:
        """The stored render of ``pack``; None when there is none to trust."""
        path = self._path(pack)
        try:
            audio = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("stock probe %s unreadable (%s): rendering it again", path.name, exc)
            return None
        if audio.dtype != np.float32 or audio.ndim != 1 or audio.size == 0:
            return None
        if not np.all(np.isfinite(audio)):
            return None
        return audio

    def put(self, pack: np.ndarray, audio: np.ndarray) -> None:
        """Keep ``audio`` for ``pack`` (best effort: a read-only folder keeps nothing)."""
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(audio, dtype=np.float32), allow_pickle=False)
        try:
            self._folder.mkdir(parents=True, exist_ok=True)
            write_atomically(self._path(pack), buffer.getvalue())
        except OSError as exc:
            log.info("stock probe not kept in %s: %s", self._folder, exc)
