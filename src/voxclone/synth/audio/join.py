"""Join synthesized pieces (sentences, chunks) with pauses, without clicks.

Each piece is trimmed of leading/trailing near-silence (below −50 dBFS in 10 ms
frames) down to a 30 ms pad, given a short raised-cosine fade-in/out, and
followed by ``pause_after_s`` of silence. The pads count towards the pause, so
the gap between the last audible sample of one piece and the first audible
sample of the next equals the pause (when the pause is at least two pads).
A zero pause crossfades the two pieces instead.

``PieceJoiner`` works incrementally for streaming: ``feed`` returns audio that
can be sent now; only a crossfade tail (a few ms) is ever held back, never a
whole piece. An engine that streams frames feeds a piece in parts
(``feed_partial``, then ``feed`` with its end): the output is the same bytes as
feeding the whole piece at once, and only the current run of near-silence plus
10 ms is held back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from voxclone.errors import InvalidInput

_SILENCE_DBFS = -50.0
_FRAME_S = 0.010
_PAD_S = 0.030
_FADE_S = 0.005
MAX_PAUSE_S = 10.0


_EMPTY = np.zeros(0, dtype=np.float32)


@dataclass(frozen=True)
class _Rendered:
    """One piece's output and the joiner state after it."""

    out: np.ndarray
    tail: np.ndarray
    gap_owed: int | None
    body_at: int  # where the piece's kept body begins in ``out``
    body_start: int  # where it begins in the piece
    body_len: int  # its length in ``out`` (without a held crossfade tail)


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
        # The piece begun by feed_partial: its audio so far, and how much of
        # its output has been sent.
        self._open: list[np.ndarray] | None = None
        self._open_sent = 0
        # Samples returned so far, and where the last fed piece landed in
        # them (word timestamps map piece time to output time with these).
        self._emitted = 0
        self.last_origin = 0  # output position of the last piece's sample 0
        self.last_body = (0, 0)  # output [start, end) of its kept samples

    def feed(self, piece: np.ndarray, pause_after_s: float = 0.0) -> np.ndarray:
        """Add a piece (the end of one begun with ``feed_partial``, if any);
        returns the audio that may be sent now."""
        pause = self._pause_samples(pause_after_s)
        samples = np.asarray(piece, dtype=np.float32).reshape(-1)
        sent = 0
        if self._open is not None:
            samples = np.concatenate([*self._open, samples])
            sent, self._open, self._open_sent = self._open_sent, None, 0
        rendered = self._render(samples, pause, self._tail, self._gap_owed)
        self._tail, self._gap_owed = rendered.tail, rendered.gap_owed
        base = self._emitted - sent  # where rendered.out[0] lands
        self.last_origin = base + rendered.body_at - rendered.body_start
        body_end = base + rendered.body_at + rendered.body_len + len(rendered.tail)
        self.last_body = (base + rendered.body_at, body_end)
        out = rendered.out[sent:]
        self._emitted += len(out)
        return out

    def feed_partial(self, audio: np.ndarray) -> np.ndarray:
        """More of the current piece, whose end is not known yet (an engine that
        streams frames): returns the part of what ``feed`` will return for the
        whole piece that no later sample can change.

        Holds back only the current run of near-silence (it may be the piece's
        trailing silence, trimmed at the end) and the last fade/crossfade
        length, so audio leaves as soon as the engine makes it.
        """
        self._open = [*(self._open or []), np.asarray(audio, dtype=np.float32).reshape(-1)]
        samples = np.concatenate(self._open)
        frame = max(1, int(round(self.sr * _FRAME_S)))
        complete = samples[: len(samples) // frame * frame]
        bounds = audible_bounds(complete, self.sr)
        if bounds is None:
            return np.zeros(0, dtype=np.float32)
        # The piece's end is at least ``bounds[1]``; what precedes it by more
        # than a fade / crossfade comes out the same whatever the pause is.
        rendered = self._render(complete, 0, self._tail, self._gap_owed)
        stable_piece = bounds[1] - max(self._fade, self._crossfade)
        if stable_piece <= rendered.body_start:
            # Too little audible body yet: even the head (gap or crossfade
            # overlap) could still change with the body's length.
            return np.zeros(0, dtype=np.float32)
        stable = rendered.body_at + stable_piece - rendered.body_start
        stable = min(stable, rendered.body_at + rendered.body_len)
        if stable <= self._open_sent:
            return np.zeros(0, dtype=np.float32)
        out = rendered.out[self._open_sent : stable]
        self._open_sent = stable
        self._emitted += len(out)
        return out

    def _pause_samples(self, pause_after_s: float) -> int:
        if not (0.0 <= pause_after_s <= MAX_PAUSE_S):
            raise InvalidInput(
                f"Pause must be between 0 and {MAX_PAUSE_S} s; got {pause_after_s}.",
                field="pause",
                limit=[0.0, MAX_PAUSE_S],
                value=pause_after_s,
            )
        return int(round(pause_after_s * self.sr))

    def _render(
        self, samples: np.ndarray, pause: int, tail: np.ndarray, gap_owed: int | None
    ) -> _Rendered:
        """What feeding ``samples`` outputs from state (tail, gap_owed); no state changes."""
        bounds = audible_bounds(samples, self.sr)
        if bounds is None:
            # A silent piece contributes only its pause.
            faded = tail * _ramp(len(tail))[::-1]
            return _Rendered(faded, _EMPTY, (gap_owed or 0) + pause, len(faded), 0, 0)

        audible_start, audible_end = bounds
        lead_pad = min(self._pad, audible_start)
        trail_pad = min(self._pad, len(samples) - audible_end)
        if pause > 0:
            trail_pad = min(trail_pad, pause)  # a short pause eats into the pad
        parts: list[np.ndarray] = []

        if tail.size:
            body = samples[audible_start - lead_pad : audible_end + trail_pad].copy()
            overlap = min(len(tail), len(body))
            fade_in = _ramp(overlap)
            parts.append(tail[: len(tail) - overlap])
            body_at = len(tail) - overlap
            mixed = tail[len(tail) - overlap :] * fade_in[::-1] + body[:overlap] * fade_in
            parts.append(mixed)
            body_start = audible_start - lead_pad
            body_len = len(body)
            body = body[overlap:]
        else:
            if gap_owed is not None:
                lead_pad = min(lead_pad, gap_owed)
                parts.append(np.zeros(gap_owed - lead_pad, dtype=np.float32))
            body_at = sum(len(p) for p in parts)
            body_start = audible_start - lead_pad
            body = samples[body_start : audible_end + trail_pad].copy()
            body_len = len(body)
            body[: self._fade] *= _ramp(min(self._fade, len(body)))

        if pause == 0:
            keep = min(self._crossfade, len(body))
            parts.append(body[: len(body) - keep])
            return _Rendered(
                np.concatenate(parts),
                body[len(body) - keep :],
                None,
                body_at,
                body_start,
                body_len - keep,
            )
        body[len(body) - self._fade :] *= _ramp(min(self._fade, len(body)))[::-1]
        parts.append(body)
        remaining = pause - trail_pad
        # Send most of the silence now (it gives the player buffer); keep back
        # one pad's worth, which the next piece's leading pad will fill.
        owed = min(remaining, self._pad)
        parts.append(np.zeros(remaining - owed, dtype=np.float32))
        return _Rendered(np.concatenate(parts), _EMPTY, owed, body_at, body_start, body_len)

    def finish(self) -> np.ndarray:
        """The held tail (faded out) and the rest of the pause after the last piece."""
        tail = self._faded_out_tail()
        silence = np.zeros(self._gap_owed or 0, dtype=np.float32)
        self._gap_owed = None
        out = np.concatenate([tail, silence])
        self._emitted += len(out)
        return out

    def _faded_out_tail(self) -> np.ndarray:
        tail = self._tail
        self._tail = np.zeros(0, dtype=np.float32)
        return tail * _ramp(len(tail))[::-1]


def join_with_pauses(
    pieces: Iterable[tuple[np.ndarray, float]], sr: int, crossfade_ms: float = 10.0
) -> np.ndarray:
    """Join ``(audio, pause_after_s)`` pieces into one array (see PieceJoiner)."""
    joiner = PieceJoiner(sr, crossfade_ms=crossfade_ms)
    out = [joiner.feed(piece, pause) for piece, pause in pieces]
    out.append(joiner.finish())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
