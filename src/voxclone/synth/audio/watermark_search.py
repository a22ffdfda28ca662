"""Watermark detection that survives a playback-speed change (issue 49).

Playing audio back faster or slower (the usual "0.9x / 1.1x" of players and
re-uploads: resampling, so tempo *and* pitch move together) shifts every
frequency by the speed factor. PerthNet reads the log magnitudes of the 128
STFT bins below 2 kHz, and its score falls from 1.0 to ~0 once they move by
~2 % (measured on a marked LibriSpeech clip: 1.00 at a 1 % mismatch, 0.41-0.61
at 2 %, < 0.02 at 3 %), so the plain detector found 0 % of marked renders
after a 0.9x or 1.1x speed change (docs/benchmarks.md, "Watermark").

The change is undone exactly by reading the samples at another rate: audio
played at speed ``s`` is the original resampled from ``rate * s`` to
``rate``, so treating it as ``rate / s`` audio gives back the original's
spectrum. :func:`detect` runs the plain detector first (unchanged cost and
verdict for unmodified audio) and only when that finds nothing reads a
central window of at most SEARCH_WINDOW_S at each speed of SPEEDS: 2 % apart
(so the true speed is never more than 1 % from one, where the score is still
~1.0) over 0.89x..1.13x.

A maximum over 12 extra reads of unmarked audio is higher than one read, so
a speed's score counts only at SEARCH_THRESHOLD, set above every score that
the search gave unmarked real speech (bench/watermark.py's corpus: the dev
set and tests/data, whole and as 3 s excerpts; docs/benchmarks.md has the
margin). The window bounds the search's cost on long uploads: the decoder is
~13 ms of CPU per audio second per read, so 12 reads of 10 s are ~1.6 s of CPU
whatever the file's length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voxclone.synth.audio.watermark import PerthMark

# Playback speeds tried, 2 % apart in log (1.02 ** k, k = +-1..+-6: 0.89x..
# 1.13x), nearest to 1x first (the smaller change is the likelier one, and a
# hit ends the search); the plain read covers 0.985x..1.015x itself. Not
# wider: unmarked speech scored highest at the extremes (0.97 at 1.17x on a
# VCTK recording played at 0.9x, bench/watermark.py's corpus), and each speed
# is another ~13 ms of CPU per audio second.
SPEEDS: tuple[float, ...] = tuple(1.02**k for m in range(1, 7) for k in (-m, m))
# Marked recordings played at 0.9x / 1.1x (and 0.9x then MP3 64 kbps) scored
# >= 0.975 at their best speed; unmarked speech <= 0.84 inside this range.
SEARCH_THRESHOLD = 0.93
SEARCH_WINDOW_S = 10.0


@dataclass(frozen=True)
class SpeedDetection:
    watermarked: bool
    confidence: float  # the plain score, or the search's when a speed found the mark
    speed: float  # the playback speed the mark was read at (1.0: unchanged)


def window(samples: np.ndarray, rate: int, seconds: float = SEARCH_WINDOW_S) -> np.ndarray:
    """The central ``seconds`` of ``samples`` (all of it when shorter)."""
    n = int(seconds * rate)
    if samples.shape[0] <= n:
        return samples
    start = (samples.shape[0] - n) // 2
    return samples[start : start + n]


def speed_scores(mark: PerthMark, samples: np.ndarray, rate: int) -> list[tuple[float, float]]:
    """(speed, score) for every speed in SPEEDS, on the central window: what
    bench/watermark.py reads to set SEARCH_THRESHOLD."""
    part = window(samples, rate)
    return [(s, mark.detect(part, round(rate / s)).confidence) for s in SPEEDS]


def detect(mark: PerthMark, samples: np.ndarray, rate: int) -> SpeedDetection:
    """Is ``samples`` marked, at its own speed or at one of SPEEDS?"""
    x = np.asarray(samples, dtype=np.float32)
    if x.ndim > 1:
        x = x.mean(axis=1)
    plain = mark.detect(x, rate)
    if plain.watermarked:
        return SpeedDetection(True, plain.confidence, 1.0)
    part = window(x, rate)
    for speed in SPEEDS:
        # Audio played at speed s is the original resampled from rate * s to
        # rate: read as rate / s audio, its spectrum is the original's again.
        found = mark.detect(part, round(rate / speed))
        if found.confidence >= SEARCH_THRESHOLD:
            return SpeedDetection(True, found.confidence, round(speed, 3))
    return SpeedDetection(False, plain.confidence, 1.0)
