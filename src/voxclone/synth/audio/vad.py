"""Speech detection and silence trimming with Silero VAD.

The Silero model ships inside the ``silero-vad`` wheel; nothing is downloaded.
It runs at 16 kHz; other rates are resampled for detection only, and the
segments are mapped back to the caller's rate.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

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
        onnx: bool = True,
    ) -> None:
        self.threshold = threshold
        self.min_speech_ms = min_speech_ms
        self.min_silence_ms = min_silence_ms
        self.pad_s = pad_s
        self.max_pause_s = max_pause_s
        self._onnx = onnx
        self._model: tuple[Any, Any] | None = None
        # One lock for loading and inference: the model object keeps recurrent
        # state between chunks, so two threads must never interleave on it.
        self._lock = threading.Lock()

    def speech_segments(self, x16k: np.ndarray) -> list[Segment]:
        """Speech regions of 16 kHz mono audio as [start, end) sample indices."""
        audio = np.ascontiguousarray(x16k, dtype=np.float32)
        if audio.shape[0] == 0:
            return []
        import torch  # silero-vad's API takes torch tensors

        with self._lock:
            model, get_speech_timestamps = self._load_locked()
            stamps = get_speech_timestamps(
                torch.from_numpy(audio),
                model,
                threshold=self.threshold,
                sampling_rate=VAD_RATE,
                min_speech_duration_ms=self.min_speech_ms,
                min_silence_duration_ms=self.min_silence_ms,
            )
        return [(int(s["start"]), int(s["end"])) for s in stamps]

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

    def _load_locked(self) -> tuple[Any, Any]:
        if self._model is None:
            self._model = _load_silero(self._onnx)
        return self._model


def _load_silero(onnx: bool) -> tuple[Any, Any]:
    """Return (model, get_speech_timestamps) from the silero-vad package."""
    import torch

    # Importing silero_vad calls torch.set_num_threads(1) for the whole
    # process; restore the caller's setting so other torch users keep theirs.
    threads = torch.get_num_threads()
    try:
        from silero_vad import get_speech_timestamps, load_silero_vad

        with warnings.catch_warnings():
            # The package locates its weights with a deprecated importlib call.
            warnings.simplefilter("ignore", DeprecationWarning)
            return load_silero_vad(onnx=onnx), get_speech_timestamps
    finally:
        torch.set_num_threads(threads)


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
