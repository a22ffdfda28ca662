"""Join synthesized pieces (sentences, chunks) with pauses, without clicks.

Each piece is trimmed of leading/trailing near-silence (below −50 dBFS in 10 ms
frames) down to a 30 ms pad, given a short raised-cosine fade-in/out, and
followed by ``pause_after_s`` of silence. The pads count towards the pause, so
the gap between the last audible sample of one piece and the first audible
sample of the next equals the pause (when the pause is at least two pads).
A zero pause crossfades the two pieces instead.

``PieceJoiner`` works incrementally for streaming: ``feed`` returns audio that
can be sent now; only a crossfade tail (a few ms) is ever held back, never a
whole piece.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from voxclone.errors import InvalidInput

_SILENCE_DBFS = -50.0
_FRAME_S = 0.010
_PAD_S = 0.030
_FADE_S = 0.005
MAX_PAUSE_S = 10.0


def _ramp(n: int) -> np.ndarray:
    """Raised-cosine 0→1 over ``n`` samples (smooth at both ends, no spectral splatter)."""
    if n <= 0:
        return np.zeros(0, dtype=np.float32)
    return (0.5 - 0.5 * np.cos(np.pi * (np.arange(n) + 0.5) / n)).astype(np.float32)


def audible_bounds(
    x: np.ndarray, sr: int, threshold_dbfs: float = _SILENCE_DBFS
) -> tuple[int, int] | None:
    """[start, end) of the frames whose RMS is above ``threshold_dbfs``; None if all silent."""
    frame = max(1, int(round(sr * _FRAME_S)))
    n_frames = -(-len(x) // frame)
    if n_frames == 0:
        return None
    padded = np.zeros(n_frames * frame, dtype=np.float64)
    padded[: len(x)] = x
    rms = np.sqrt(np.mean(padded.reshape(n_frames, frame) ** 2, axis=1))
    loud = np.nonzero(rms > 10.0 ** (threshold_dbfs / 20.0))[0]
    if loud.size == 0:
        return None
    return int(loud[0] * frame), int(min(len(x), (loud[-1] + 1) * frame))


class PieceJoiner:
    """Incremental joiner: ``feed`` each piece with the pause that follows it,
    send what it returns, and send ``finish()`` at the end."""

    def __init__(self, sr: int, *, crossfade_ms: float = 10.0) -> None:
        self.sr = sr
        self._pad = int(round(sr * _PAD_S))
        self._fade = max(1, int(round(sr * _FADE_S)))
        self._crossfade = max(1, int(round(sr * crossfade_ms / 1000.0)))
        # Unfaded end of the previous piece, kept for a crossfade (pause 0 only).
        self._tail = np.zeros(0, dtype=np.float32)
        # Silence still owed before the next audible sample; the next piece's
        # leading pad counts towards it. None at stream start and in crossfade mode.
        self._gap_owed: int | None = None

    def feed(self, piece: np.ndarray, pause_after_s: float = 0.0) -> np.ndarray:
        """Add a piece; returns the audio that may be sent now."""
        if not (0.0 <= pause_after_s <= MAX_PAUSE_S):
            raise InvalidInput(
                f"Pause must be between 0 and {MAX_PAUSE_S} s; got {pause_after_s}.",
                field="pause",
                limit=[0.0, MAX_PAUSE_S],
                value=pause_after_s,
            )
        samples = np.asarray(piece, dtype=np.float32).reshape(-1)
        pause = int(round(pause_after_s * self.sr))
        bounds = audible_bounds(samples, self.sr)
        if bounds is None:
            # A silent piece contributes only its pause.
            tail = self._faded_out_tail()
            self._gap_owed = (self._gap_owed or 0) + pause
            return tail

        audible_start, audible_end = bounds
        lead_pad = min(self._pad, audible_start)
        trail_pad = min(self._pad, len(samples) - audible_end)
        if pause > 0:
            trail_pad = min(trail_pad, pause)  # a short pause eats into the pad
        parts: list[np.ndarray] = []

        if self._tail.size:
            body = samples[audible_start - lead_pad : audible_end + trail_pad].copy()
            body = self._crossfade_into(body, parts)
        else:
            if self._gap_owed is not None:
                lead_pad = min(lead_pad, self._gap_owed)
                parts.append(np.zeros(self._gap_owed - lead_pad, dtype=np.float32))
            body = samples[audible_start - lead_pad : audible_end + trail_pad].copy()
            body[: self._fade] *= _ramp(min(self._fade, len(body)))

        if pause == 0:
            keep = min(self._crossfade, len(body))
            parts.append(body[: len(body) - keep])
            self._tail = body[len(body) - keep :]
            self._gap_owed = None
        else:
            body[len(body) - self._fade :] *= _ramp(min(self._fade, len(body)))[::-1]
            parts.append(body)
            remaining = pause - trail_pad
            # Send most of the silence now (it gives the player buffer); keep back
            # one pad's worth, which the next piece's leading pad will fill.
            owed = min(remaining, self._pad)
            parts.append(np.zeros(remaining - owed, dtype=np.float32))
            self._gap_owed = owed
        return np.concatenate(parts)

    def finish(self) -> np.ndarray:
        """The held tail (faded out) and the rest of the pause after the last piece."""
        tail = self._faded_out_tail()
        silence = np.zeros(self._gap_owed or 0, dtype=np.float32)
        self._gap_owed = None
        return np.concatenate([tail, silence])

    def _faded_out_tail(self) -> np.ndarray:
        tail = self._tail
        self._tail = np.zeros(0, dtype=np.float32)
        return tail * _ramp(len(tail))[::-1]

    def _crossfade_into(self, body: np.ndarray, parts: list[np.ndarray]) -> np.ndarray:
        """Mix the held tail into the head of ``body``; returns the unmixed rest of body."""
        tail = self._tail
        self._tail = np.zeros(0, dtype=np.float32)
        overlap = min(len(tail), len(body))
        fade_in = _ramp(overlap)
        lead_out = tail[: len(tail) - overlap]
        mixed = tail[len(tail) - overlap :] * fade_in[::-1] + body[:overlap] * fade_in
        parts.append(np.concatenate([lead_out, mixed]))
        return body[overlap:]


def join_with_pauses(
    pieces: Iterable[tuple[np.ndarray, float]], sr: int, crossfade_ms: float = 10.0
) -> np.ndarray:
    """Join ``(audio, pause_after_s)`` pieces into one array (see PieceJoiner)."""
    joiner = PieceJoiner(sr, crossfade_ms=crossfade_ms)
    out = [joiner.feed(piece, pause) for piece, pause in pieces]
    out.append(joiner.finish())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
