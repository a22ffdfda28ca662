"""The long-form benchmark's analysis of one long recording (bench/long_form.py).

Pure functions over audio and text, no model loading: the transcriber and the
speaker listener are passed in, so the smoke tests run them on synthetic audio.

* ``cut_windows``: consecutive ~28 s windows, each cut at the quietest 50 ms
  near its target end (a pause between sentences, not a word).
* ``window_wer``: Whisper hears each window; its words are aligned to the whole
  reference once (difflib), which partitions the reference among the windows,
  so the windows' errors add up to the piece's.
* ``gap_stats``: the silences between stretches of speech (the product's own
  -50 dBFS "audible" threshold, synth/audio/join.py) and the sample step at
  each silence edge (a click at a chunk join is a large step out of silence).
* ``drift``: slope per 10 minutes, max-min, first and last five minutes.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from voxclone.synth.audio.join import audible_bounds
from voxclone.synth.voice.asr import normalize_for_wer, word_edits

WINDOW_S = 28.0  # Whisper hears 30 s at once; a cut may move the end by SEARCH_S
SEARCH_S = 3.0
FRAME_S = 0.01
QUIET_SMOOTH_S = 0.05
SILENCE_DBFS = -50.0  # the threshold of synth/audio/join.py audible_bounds
MIN_GAP_S = 0.08  # shorter dips are inside words (stops), not pauses
LONG_GAP_S = 2.0  # no sentence pause of the product is this long (a stall or a lost chunk)
EDGE_S = 0.005
EDGE_MIN_SAMPLES = 2  # a step needs two samples; the smallest edge window still has them
CLICK_STEP = 0.1  # a 0.1 full-scale jump out of silence is an audible click


@dataclass(frozen=True)
class Window:
    start: int  # samples
    end: int

    def minutes(self, sr: int) -> float:
        """The window's midpoint, in minutes from the start of the piece."""
        return (self.start + self.end) / 2 / sr / 60.0


def frame_rms(x: np.ndarray, sr: int, frame_s: float = FRAME_S) -> np.ndarray:
    frame = max(1, round(sr * frame_s))
    n = len(x) // frame
    if n == 0:
        return np.zeros(0)
    blocks = np.asarray(x[: n * frame], dtype=np.float64).reshape(n, frame)
    return np.sqrt(np.mean(blocks**2, axis=1))


def cut_windows(
    x: np.ndarray, sr: int, window_s: float = WINDOW_S, search_s: float = SEARCH_S
) -> list[Window]:
    """Consecutive windows covering ``x``, each ending at the quietest
    ``QUIET_SMOOTH_S`` within ``search_s`` of ``window_s`` after its start; the
    last takes what is left (merged into the one before when under half a window)."""
    frame = max(1, round(sr * FRAME_S))
    rms = frame_rms(x, sr)
    smooth = max(1, round(QUIET_SMOOTH_S / FRAME_S))
    quiet = np.convolve(rms, np.ones(smooth) / smooth, mode="same") if rms.size else rms
    windows: list[Window] = []
    start = 0
    while len(x) - start > (window_s + search_s) * sr:
        # In whole frames of ``frame`` samples: at 22,050 Hz a frame is 220
        # samples, 9.977 ms, and counting it as 10 ms put the cuts 3.7 s early by
        # minute 27 (Piper's windows shrank to 21 s).
        lo = int((start + (window_s - search_s) * sr) / frame)
        hi = int((start + (window_s + search_s) * sr) / frame)
        best = lo + int(np.argmin(quiet[lo:hi]))
        end = best * frame + frame // 2
        windows.append(Window(start, end))
        start = end
    if len(x) > start:
        if windows and len(x) - start < window_s * sr / 2:
            windows[-1] = Window(windows[-1].start, len(x))
        else:
            windows.append(Window(start, len(x)))
    return windows


def _hyp_to_ref(ref: list[str], hyp: list[str]) -> list[int]:
    """For each heard word, the reference position it lines up with."""
    where = [0] * len(hyp)
    matcher = difflib.SequenceMatcher(None, ref, hyp, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for j in range(j1, j2):
            if tag == "equal":
                where[j] = i1 + (j - j1)
            elif tag == "replace":
                where[j] = i1 + (j - j1) * (i2 - i1) // (j2 - j1)
            else:  # insert: heard but not in the text
                where[j] = i1
    return where


def window_wer(
    reference: str, heard: Sequence[str], *, open_end: bool = False
) -> list[dict[str, Any]]:
    """Per window: its share of the reference, the words heard, errors and WER.

    The reference is split where each window's first heard word aligns, so
    every reference word belongs to exactly one window (a window Whisper heard
    nothing in gets the words up to the next one's start: all deletions).
    ``open_end``: the recording stopped part-way (a stream cut at a deadline),
    so the reference ends where the last heard word aligns, not at its end."""
    ref = normalize_for_wer(reference)
    hyps = [normalize_for_wer(text) for text in heard]
    flat = [word for words in hyps for word in words]
    where = _hyp_to_ref(ref, flat)
    starts: list[int] = []
    offset = 0
    for index, words in enumerate(hyps):
        if index == 0:
            start = 0
        elif words:
            start = where[offset]
        else:  # nothing heard: it starts after the last word heard before it
            start = where[offset - 1] + 1 if offset else 0
        starts.append(min(len(ref), max(start, starts[-1])) if starts else 0)
        offset += len(words)
    last = where[-1] + 1 if open_end and where else len(ref)
    rows = []
    for index, words in enumerate(hyps):
        end = starts[index + 1] if index + 1 < len(hyps) else max(last, starts[index])
        part = ref[starts[index] : end]
        errors = word_edits(part, words)
        rows.append(
            {
                "ref_words": len(part),
                "heard_words": len(words),
                "errors": errors,
                "wer": errors / len(part) if part else (0.0 if not words else 1.0),
            }
        )
    return rows


def gap_stats(x: np.ndarray, sr: int) -> dict[str, Any]:
    """Silences (frames under -50 dBFS for at least ``MIN_GAP_S``) between the
    first and last audible frame, and the sample step at each silence edge."""
    bounds = audible_bounds(x, sr, SILENCE_DBFS)
    if bounds is None:
        return {"gaps": 0}
    start, end = bounds
    frame = max(1, round(sr * FRAME_S))
    silent = frame_rms(x[start:end], sr) < 10.0 ** (SILENCE_DBFS / 20.0)
    gaps: list[tuple[int, int]] = []  # frame runs
    run_start = None
    for i, flag in enumerate(np.append(silent, False)):
        if flag and run_start is None:
            run_start = i
        elif not flag and run_start is not None:
            if (i - run_start) * FRAME_S >= MIN_GAP_S:
                gaps.append((run_start, i))
            run_start = None
    lengths = np.array([(b - a) * FRAME_S for a, b in gaps])
    edge = max(EDGE_MIN_SAMPLES, round(sr * EDGE_S))
    steps = []
    for a, b in gaps:
        for at in (start + a * frame, start + b * frame):
            piece = np.asarray(x[max(0, at - edge) : at + edge], dtype=np.float64)
            if piece.size >= EDGE_MIN_SAMPLES:
                steps.append(float(np.max(np.abs(np.diff(piece)))))
    minutes = (end - start) / sr / 60.0
    if not gaps:
        return {"gaps": 0, "speech_minutes": round(minutes, 2)}
    return {
        "gaps": len(gaps),
        "gaps_per_minute": round(len(gaps) / minutes, 1) if minutes else None,
        "median_s": round(float(np.median(lengths)), 3),
        "p95_s": round(float(np.percentile(lengths, 95)), 3),
        "max_s": round(float(lengths.max()), 3),
        "max_at_min": round((start + gaps[int(lengths.argmax())][0] * frame) / sr / 60.0, 2),
        "long_gaps": int((lengths >= LONG_GAP_S).sum()),
        "edge_step_p99": round(float(np.percentile(steps, 99)), 4) if steps else None,
        "edge_step_max": round(max(steps), 4) if steps else None,
        "clicks": int(sum(step >= CLICK_STEP for step in steps)),
        "speech_minutes": round(minutes, 2),
    }


def drift(
    minutes: Sequence[float], values: Sequence[float], edge_min: float = 5.0
) -> dict[str, Any]:
    """How a per-window series moves across the piece: least-squares slope per
    10 minutes, max-min, and the means of the first and last ``edge_min`` minutes."""
    pairs = [(m, v) for m, v in zip(minutes, values, strict=True) if math.isfinite(v)]
    if not pairs:
        return {"n": 0}
    xs = np.array([m for m, _ in pairs])
    ys = np.array([v for _, v in pairs])
    slope = float(np.polyfit(xs, ys, 1)[0]) * 10.0 if len(pairs) > 1 else 0.0
    end = float(xs.max())
    first = ys[xs <= edge_min]
    last = ys[xs >= end - edge_min]
    return {
        "n": len(pairs),
        "mean": round(float(ys.mean()), 4),
        "min": round(float(ys.min()), 4),
        "max": round(float(ys.max()), 4),
        "range": round(float(ys.max() - ys.min()), 4),
        "slope_per_10min": round(slope, 4),
        "first_5min": round(float(first.mean()), 4) if first.size else None,
        "last_5min": round(float(last.mean()), 4) if last.size else None,
    }


def analyse(
    x: np.ndarray,
    sr: int,
    text: str,
    transcribe: Callable[[np.ndarray, int], str],
    embed: Callable[[np.ndarray, int], np.ndarray],
    loudness: Callable[[np.ndarray, int], float],
    *,
    open_end: bool = False,
) -> dict[str, Any]:
    """Windows with WER, speaker similarity to the first window and LUFS; their
    drift; and the gaps of the whole recording."""
    windows = cut_windows(x, sr)
    heard = [transcribe(x[w.start : w.end], sr) for w in windows]
    wers = window_wer(text, heard, open_end=open_end)
    vectors = [np.asarray(embed(x[w.start : w.end], sr), dtype=np.float64) for w in windows]
    first = vectors[0] / (np.linalg.norm(vectors[0]) or 1.0)
    rows = []
    for w, scored, vector, said in zip(windows, wers, vectors, heard, strict=True):
        similarity = float(np.dot(first, vector / (np.linalg.norm(vector) or 1.0)))
        rows.append(
            {
                "minute": round(w.minutes(sr), 3),
                "seconds": round((w.end - w.start) / sr, 2),
                **scored,
                "wer": round(scored["wer"], 4),
                "similarity": round(similarity, 4),
                "lufs": round(loudness(x[w.start : w.end], sr), 2),
                "heard": said,
            }
        )
    later = rows[1:]  # the first window's similarity to itself is 1 by definition
    finite_lufs = [r["lufs"] for r in rows if math.isfinite(r["lufs"])]
    errors = sum(r["errors"] for r in rows)
    ref_words = sum(r["ref_words"] for r in rows)
    return {
        "audio_s": round(len(x) / sr, 1),
        "windows": rows,
        "wer": round(errors / ref_words, 4) if ref_words else None,
        "wer_drift": drift([r["minute"] for r in rows], [r["wer"] for r in rows]),
        "similarity_drift": drift([r["minute"] for r in later], [r["similarity"] for r in later]),
        "lufs_drift": drift([r["minute"] for r in rows], [r["lufs"] for r in rows]),
        "lufs_std": round(float(np.std(finite_lufs)), 2) if finite_lufs else None,
        "gaps": gap_stats(x, sr),
    }
