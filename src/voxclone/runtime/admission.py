"""How long admitted work will take: the estimate admission control refuses by.

Two small pieces, both pure (no threads, no clock), so tests drive them with
made-up numbers:

* :class:`WorkRate` learns the engine's seconds per unit of work (a character
  of the text as it will be spoken: after SSML, lexicon, number and phoneme
  expansion) on one worker from finished engine calls. It plans with the
  **median** of the recent calls, not a running mean: one call that ran while
  the machine was swamped (the 2-core CI host has shown single calls 4x the
  usual) must not refuse the requests after it, and the median of a window
  ignores it while still following a machine that stays busier. Before any
  call was measured it answers an *optimistic* prior, so a cold server never
  refuses what an idle machine could do; the server measures one real call
  right after start-up (:meth:`Scheduler.calibrate`), so the prior stands for
  at most the first seconds.
* :func:`estimate` turns the work ahead of a new request plus its own into
  the time its first audio and its last chunk would be ready, the way the
  scheduler serves them. A request's first chunk jumps the queue (it goes
  ahead of every later chunk, see ``PRIORITY_FIRST_CHUNK``), so it waits only
  for what runs now and for other requests' first chunks; its later chunks
  wait for all the admitted work, which drains at ``workers`` x the
  one-worker rate, at most ``parallel`` of them at once (the service's
  look-ahead), the last one alone. A single-chunk request (most requests) is
  done when its first chunk is.

Admission refuses only when that estimate, at the planning rate, is later
than the request's own deadline x :data:`HEADROOM`.
"""

from __future__ import annotations

import heapq
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# One-worker engine seconds per unit assumed before any call was measured:
# the *fast* end of what was measured (Kokoro int8, one intra-op thread:
# 0.015 s/char on an idle laptop; 0.03-0.06 on this 2-core host; 0.1-0.4 on
# the shared CI machine under load). Optimistic on purpose: an estimate that
# refuses must be sure, and the calibration call at start-up replaces it.
COLD_SECONDS_PER_CHAR = 0.015
# How many recent calls the planning rate is the median of: enough that one
# or two outliers never move it, few enough (~10-30 s of a busy server) that
# it follows a machine that got busier or quieter.
RATE_WINDOW = 16
# Calls on fewer units are dominated by per-call overhead: not learned from.
MIN_LEARN_CHARS = 8.0
# Admit only what the estimate says finishes within this share of the time
# left. What the estimate leaves out: CPU spent outside the engine (text
# preparation, DSP, encoding, the event loop: 5-10 % of a request's time in
# bench/rtf.py's service/engine ratio) and the per-call spread around the
# median (the middle half of calls within about +-15 % on this host).
HEADROOM = 0.85


class WorkRate:
    """Engine seconds per unit of work on one worker, learned from finished calls."""

    def __init__(self, prior: float = COLD_SECONDS_PER_CHAR, window: int = RATE_WINDOW) -> None:
        self._prior = prior
        self._recent: deque[float] = deque(maxlen=max(1, window))
        self.samples = 0

    @property
    def calibrated(self) -> bool:
        return self.samples > 0

    @property
    def mean(self) -> float:
        """The typical rate: the median of the recent calls (the prior before any)."""
        if not self._recent:
            return self._prior
        return float(statistics.median(self._recent))

    @property
    def pessimistic(self) -> float:
        """What admission plans with. The median, not an upper quantile: the
        spread of single calls is covered once, by :data:`HEADROOM`; planning
        with a high quantile as well refused requests that fitted."""
        return self.mean

    def observe(self, elapsed_s: float, chars: float, *, cores: float = 1.0) -> None:
        """One engine call took ``elapsed_s`` for ``chars`` units on ``cores``.

        A call that ran alone on several cores (the fast lane) is counted as
        if the cores had shared it perfectly (elapsed x cores): the slowest
        one-worker rate it could mean, so an idle-server measurement never
        makes a loaded server over-admit.
        """
        if chars < MIN_LEARN_CHARS or elapsed_s <= 0:
            return
        self.samples += 1
        self._recent.append(elapsed_s * max(1.0, cores) / chars)


@dataclass(frozen=True)
class FirstAhead:
    """What a new first chunk queues behind, in units: the work the running
    calls have left and the first chunks admitted before it (in order)."""

    running: Sequence[float]
    queued: Sequence[float]

    def start(self, workers: int) -> float:
        """Units of work until a worker is free for the new chunk, served FIFO.

        Exact list scheduling, not "the work ahead shared by the workers": two
        short requests on two workers both start at once, where the shared
        view made the second wait for half of the first and refused it."""
        workers = max(1, workers)
        free = sorted(self.running)[:workers]
        free += [0.0] * (workers - len(free))
        heapq.heapify(free)
        for units in self.queued:
            heapq.heappush(free, heapq.heappop(free) + units)
        return free[0]


@dataclass(frozen=True)
class Estimate:
    """Seconds from now until a new request's first audio and its last chunk are ready."""

    wait_s: float  # until a worker is free for its first chunk
    first_audio_s: float
    finish_s: float


def estimate(
    *,
    reserved_chars: float,
    chars: float,
    piece_chars: float,
    seconds_per_char: float,
    workers: int,
    parallel: int = 2,
    first_ahead: FirstAhead | None = None,
    first_piece_chars: float | None = None,
) -> Estimate:
    """When a request of ``chars`` (in pieces of at most ``piece_chars``) would be done.

    ``reserved_chars`` is what admitted requests still have to render (queued
    and running chunks alike). ``first_ahead`` is what a new first chunk still
    waits for (running calls and other first chunks queued before it); None:
    all of the reserved work, shared by the workers. ``first_piece_chars`` is this
    request's first chunk (a stream's is cut short for its first audio);
    None: a whole piece.
    """
    workers = max(1, workers)
    lanes = max(1, min(workers, parallel))
    piece_units = min(chars, max(1.0, piece_chars))
    first_units = piece_units if first_piece_chars is None else min(chars, first_piece_chars)
    if first_ahead is None:
        first_wait = reserved_chars * seconds_per_char / workers
    else:
        first_wait = first_ahead.start(workers) * seconds_per_char
    first_audio = first_wait + first_units * seconds_per_char
    rest = chars - first_units
    if rest <= 0:
        return Estimate(wait_s=first_wait, first_audio_s=first_audio, finish_s=first_audio)
    # The later chunks queue behind everything admitted; the request's chunks
    # then render ``lanes`` at a time (the look-ahead), the last one alone.
    backlog = reserved_chars * seconds_per_char / workers
    last = min(rest, piece_units) * seconds_per_char
    finish = max(first_wait, backlog) + (chars * seconds_per_char - last) / lanes + last
    return Estimate(wait_s=first_wait, first_audio_s=first_audio, finish_s=finish)


@dataclass(frozen=True)
class AdmissionTerms:
    """What a request must be served by, for the admission the speech service
    takes on its behalf once it knows the request needs a render of its own
    (not a cache hit, not identical to a render in flight): coalesce first,
    admit second."""

    deadline: float | None  # scheduler clock (time.monotonic); None: no deadline
    must_finish: bool = True  # whole files; streams whose client named a deadline
    first_audio_s: float | None = None  # a stream's budget for its first audio
    # False: the request's first chunk takes its turn behind chunks queued
    # before it instead of jumping the queue. A voice agent's later clause:
    # the chunks of the clause playing now are needed sooner, and let jump,
    # two sessions' next whole sentences (~3.5 s each) went ahead of a
    # clause's 1 s tail, a 5 s stall (bench/realtime.py, 2026-12-06).
    queue_first: bool = True
    # A voice agent's socket: while its requests are the only live ones, their
    # chunks take every core in turn (runtime/scheduler/workers.py).
    listener: str | None = None
    # The reservation the event loop took on a lower bound of the request's
    # cost (Scheduler.precheck), so a flood arriving at once sees itself; the
    # service replaces it with the priced one, or releases it (cache hit,
    # shared render). Whoever holds the terms releases it if the request fails.
    provisional: Releasable | None = None

    def release(self) -> None:
        """Free the provisional reservation (harmless when already replaced)."""
        if self.provisional is not None:
            self.provisional.release()


class Releasable(Protocol):
    def release(self) -> None: ...
