"""Speech detection and silence trimming with Silero VAD.

The Silero model ships inside the ``silero-vad`` wheel; nothing is downloaded.
It runs at 16 kHz; other rates are resampled for detection only, and the
segments are mapped back to the caller's rate.

The model's ONNX file runs here in ONNX Runtime directly, with the package's
own windowing (512 samples with 64 of context, recurrent state carried) and
its segment rules (enter at ``threshold``, leave below ``threshold - 0.15``
after ``min_silence_ms``, drop segments under ``min_speech_ms``, pad 30 ms).
The package's API takes torch tensors and importing it imports torch: on a
server that was ~2 s of the first clone (most of it holding the GIL) and
~370 MiB of memory for a 2 MB model. tests/integration/test_vad_silero.py checks the
segments against the package's own ``get_speech_timestamps``.
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from voxclone.errors import ModelAssetError
from voxclone.synth.asset_packages import missing
from voxclone.synth.audio.resample import resample

VAD_RATE = 16_000

Segment = tuple[int, int]  # [start, end) in samples


@dataclass(frozen=True)
class TrimResult:
    """Trimmed audio plus where its pieces came from.

    ``pieces`` are the kept [start, end) intervals of the input, in order;
    ``segments`` are the speech segments re-expressed in the trimmed timeline.
    """

    samples: np.ndarray
    pieces: list[Segment]
    segments: list[Segment]


class SpeechDetector:
    """Finds speech with Silero VAD; the model is loaded once, on first use."""

    def __init__(
        self,
        *,
        threshold: float = 0.5,
        min_speech_ms: int = 250,
        min_silence_ms: int = 100,
        pad_s: float = 0.1,
        max_pause_s: float = 0.6,
    ) -> None:
        self.threshold = threshold
        self.min_speech_ms = min_speech_ms
        self.min_silence_ms = min_silence_ms
        self.pad_s = pad_s
        self.max_pause_s = max_pause_s
        self._model: SileroModel | None = None
        # Loads the model once. Inference needs no lock: the recurrent state
        # lives in each call (the package's model object kept it, so every
        # call had to hold a lock), and an ONNX Runtime session runs calls
        # from several threads.
        self._lock = threading.Lock()

    def speech_segments(self, x16k: np.ndarray) -> list[Segment]:
        """Speech regions of 16 kHz mono audio as [start, end) sample indices."""
        audio = np.ascontiguousarray(x16k, dtype=np.float32)
        if audio.shape[0] == 0:
            return []
        with self._lock:
            model = self._load_locked()
        probabilities = model.probabilities(audio)
        return speech_timestamps(
            probabilities,
            audio.shape[0],
            threshold=self.threshold,
            min_speech_ms=self.min_speech_ms,
            min_silence_ms=self.min_silence_ms,
        )

    def trim(self, x: np.ndarray, sr: int) -> np.ndarray:
        """Keep speech (padded by ``pad_s``) and shorten pauses longer than ``max_pause_s``."""
        return self.trim_segments(x, sr, self.segments_at_rate(x, sr)).samples

    def segments_at_rate(self, x: np.ndarray, sr: int) -> list[Segment]:
        """Speech segments of audio at any rate, in that rate's sample indices."""
        x16k = resample(x, sr, VAD_RATE)
        segments = self.speech_segments(x16k)
        if sr == VAD_RATE:
            return segments
        scale = sr / VAD_RATE
        n = x.shape[0]
        return [(min(n, round(s * scale)), min(n, round(e * scale))) for s, e in segments]

    def trim_segments(self, x: np.ndarray, sr: int, segments: list[Segment]) -> TrimResult:
        """Trim using segments already found (in ``x``'s sample indices)."""
        pieces = plan_pieces(
            segments, x.shape[0], sr, pad_s=self.pad_s, max_pause_s=self.max_pause_s
        )
        samples = _join(x, pieces, sr)
        return TrimResult(samples, pieces, _remap(segments, pieces))

    def _load_locked(self) -> SileroModel:
        if self._model is None:
            self._model = SileroModel.load()
        return self._model


SILERO_WINDOW = 512  # samples per probability at 16 kHz
SILERO_CONTEXT = 64  # samples of the previous window the model sees again
SILERO_STATE = (2, 1, 128)
SILERO_PAD_MS = 30  # the package's default padding of each segment
SILERO_EXIT_GAP = 0.15  # leave speech below threshold - this (the package's rule)


def _silero_file() -> Path:
    """``silero_vad/data/silero_vad.onnx``, found without importing the package
    (it imports torch, which serving does not install: synth/asset_packages.py)."""
    spec = importlib.util.find_spec("silero_vad")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    path = Path(locations[0]) / "data" / "silero_vad.onnx" if locations else None
    if path is None or not path.is_file():
        raise ModelAssetError(missing("speech detection's model (silero-vad's silero_vad.onnx)"))
    return path


class SileroModel:
    """Silero VAD's ONNX graph in ONNX Runtime (one thread, as the package sets)."""

    def __init__(self, session: Any) -> None:
        self._session = session

    @classmethod
    def load(cls) -> SileroModel:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        return cls(
            ort.InferenceSession(str(_silero_file()), options, providers=["CPUExecutionProvider"])
        )

    def probabilities(self, x16k: np.ndarray) -> list[float]:
        """Speech probability of each 512-sample window (the last zero-padded),
        the recurrent state and 64 samples of context carried between windows."""
        state = np.zeros(SILERO_STATE, np.float32)
        context = np.zeros((1, SILERO_CONTEXT), np.float32)
        rate = np.array(VAD_RATE, dtype=np.int64)
        out = []
        for start in range(0, x16k.shape[0], SILERO_WINDOW):
            window = x16k[start : start + SILERO_WINDOW]
            if window.shape[0] < SILERO_WINDOW:
                window = np.pad(window, (0, SILERO_WINDOW - window.shape[0]))
            frame = np.concatenate([context, window[None, :]], axis=1)
            prob, state = self._session.run(None, {"input": frame, "state": state, "sr": rate})
            context = frame[:, -SILERO_CONTEXT:]
            out.append(float(prob.reshape(-1)[0]))
        return out


def speech_timestamps(
    probabilities: list[float],
    n_samples: int,
    *,
    threshold: float,
    min_speech_ms: int,
    min_silence_ms: int,
    pad_ms: int = SILERO_PAD_MS,
) -> list[Segment]:
    """Segments from window probabilities, by silero-vad's rules (no length cap).

    Speech starts at a window at or above ``threshold``; it ends where the
    probability first fell below ``threshold - 0.15`` once that has lasted
    ``min_silence_ms`` (speech in between cancels the end); segments of at
    most ``min_speech_ms`` are dropped; then each side is padded by
    ``pad_ms``, or by half the gap where two segments are closer than that.
    """
    exit_below = max(threshold - SILERO_EXIT_GAP, 0.01)
    min_speech = VAD_RATE * min_speech_ms / 1000
    min_silence = VAD_RATE * min_silence_ms / 1000
    pad = VAD_RATE * pad_ms / 1000
    found: list[list[int]] = []
    start: int | None = None
    silence_from = 0  # 0: no silence pending (as in the package)
    for index, prob in enumerate(probabilities):
        here = index * SILERO_WINDOW
        if prob >= threshold:
            silence_from = 0
            if start is None:
                start = here
                continue
        if start is not None and prob < exit_below:
            silence_from = silence_from or here
            if here - silence_from < min_silence:
                continue
            if silence_from - start > min_speech:
                found.append([start, silence_from])
            start, silence_from = None, 0
    if start is not None and n_samples - start > min_speech:
        found.append([start, n_samples])
    for i, segment in enumerate(found):
        if i == 0:
            segment[0] = int(max(0, segment[0] - pad))
        if i == len(found) - 1:
            segment[1] = int(min(n_samples, segment[1] + pad))
            continue
        following = found[i + 1]
        gap = following[0] - segment[1]
        if gap < 2 * pad:
            segment[1] += int(gap // 2)
            following[0] = int(max(0, following[0] - gap // 2))
        else:
            segment[1] = int(min(n_samples, segment[1] + pad))
            following[0] = int(max(0, following[0] - pad))
    return [(a, b) for a, b in found]


def plan_pieces(
    segments: list[Segment], n: int, sr: int, *, pad_s: float, max_pause_s: float
) -> list[Segment]:
    """Intervals of the input to keep.

    Each speech segment grows by ``pad_s`` on both sides. A pause between two
    segments is kept whole when it is at most ``max_pause_s`` long; a longer
    one keeps ``max_pause_s / 2`` after the first and before the second, so
    the joined pause is exactly ``max_pause_s`` and sounds natural.
    """
    if not segments:
        return []
    pad = round(pad_s * sr)
    half_pause = round(max_pause_s * sr / 2)
    max_pause = 2 * half_pause
    pieces: list[list[int]] = []
    for start, end in sorted(segments):
        if not pieces:
            pieces.append([max(0, start - pad), end])
            continue
        previous = pieces[-1]
        gap = start - previous[1]
        if gap <= max_pause:
            previous[1] = max(previous[1], end)
        else:
            previous[1] = previous[1] + half_pause
            pieces.append([start - half_pause, end])
    pieces[-1][1] = min(n, pieces[-1][1] + pad)
    return [(s, e) for s, e in pieces]


_FADE_S = 0.005


def _join(x: np.ndarray, pieces: list[Segment], sr: int) -> np.ndarray:
    """Concatenate pieces with a short fade at each cut so joins do not click."""
    if not pieces:
        return np.zeros(0, dtype=np.float32)
    parts = [np.array(x[s:e], dtype=np.float32) for s, e in pieces]
    fade = max(1, round(_FADE_S * sr))
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    for i, part in enumerate(parts):
        k = min(fade, part.shape[0])
        if i > 0:
            part[:k] *= ramp[:k]
        if i < len(parts) - 1:
            part[part.shape[0] - k :] *= ramp[:k][::-1]
    return np.concatenate(parts)


def _remap(segments: list[Segment], pieces: list[Segment]) -> list[Segment]:
    """Express segments (original timeline) in the trimmed timeline."""
    out: list[Segment] = []
    offset = 0
    for p_start, p_end in pieces:
        for s, e in segments:
            s2, e2 = max(s, p_start), min(e, p_end)
            if e2 > s2:
                out.append((s2 - p_start + offset, e2 - p_start + offset))
        offset += p_end - p_start
    return out


def trimmed_to_original(t: int, pieces: list[Segment]) -> int:
    """Map a sample index in the trimmed audio back to the input timeline."""
    offset = 0
    for p_start, p_end in pieces:
        length = p_end - p_start
        if t <= offset + length:
            return p_start + (t - offset)
        offset += length
    return pieces[-1][1] if pieces else 0
