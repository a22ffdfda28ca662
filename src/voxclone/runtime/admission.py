"""How long admitted work will take: the estimate admission control refuses by.

Two small pieces, both pure (no threads, no clock), so tests drive them with
made-up numbers:

* :class:`WorkRate` learns the engine's seconds per character of text on one
  worker from finished engine calls: a running mean for the first few calls,
  then an exponentially weighted mean (it follows a machine that gets busier
  or quieter) plus the weighted mean deviation, so the figure admission uses
  is a pessimistic one. Before any call was measured it answers a deliberately
  slow prior: a cold server under-admits its first burst (clients get 503 +
  Retry-After) rather than over-admitting it (clients time out after compute
  was spent on them).
* :func:`estimate` turns the reserved work plus a new request into the time
  its first audio and its last chunk would be ready, the way the scheduler
  serves them: every worker busy with the work ahead (work-conserving, so it
  drains at ``workers`` x the one-worker rate), then the request's own chunks,
  at most ``parallel`` of them at once (the service's look-ahead), the last
  one alone. A single-chunk request's own time is not divided by the workers:
  one chunk runs on one worker.
"""

from __future__ import annotations

from dataclasses import dataclass

# One-worker engine seconds per character assumed before any call was
# measured. Kokoro int8 with one intra-op thread measured 0.015 s/char on an
# idle laptop and 0.1-0.4 s/char on the shared 2-core CI machine under load
# (docs/benchmarks.md "overload"): the prior sits at the slow end on purpose.
COLD_SECONDS_PER_CHAR = 0.25
# Weight of the newest measurement once the running mean has enough samples.
RATE_SMOOTHING = 0.2
# Calls on fewer characters are dominated by per-call overhead: not learned from.
MIN_LEARN_CHARS = 8.0
# Admit only what the estimate says finishes within this share of the time
# left: CPU spent outside the engine (text preparation, encoding, the event
# loop) and a stream's first chunk jumping the queue are not in the estimate.
HEADROOM = 0.85


class WorkRate:
    """Engine seconds per character on one worker, learned from finished calls."""

    def __init__(
        self, prior: float = COLD_SECONDS_PER_CHAR, smoothing: float = RATE_SMOOTHING
    ) -> None:
        self._prior = prior
        self._smoothing = smoothing
        self._mean = prior
        self._deviation = 0.0
        self.samples = 0

    @property
    def calibrated(self) -> bool:
        return self.samples > 0

    @property
    def mean(self) -> float:
        return self._mean

    @property
    def pessimistic(self) -> float:
        """What admission plans with: the mean plus its typical deviation."""
        return self._mean + self._deviation

    def observe(self, elapsed_s: float, chars: float, *, cores: float = 1.0) -> None:
        """One engine call took ``elapsed_s`` for ``chars`` characters on ``cores``.

        A call that ran alone on several cores (the fast lane) is counted as
        if the cores had shared it perfectly (elapsed x cores): the slowest
        one-worker rate it could mean, so an idle-server measurement never
        makes a loaded server over-admit.
        """
        if chars < MIN_LEARN_CHARS or elapsed_s <= 0:
            return
        measured = elapsed_s * max(1.0, cores) / chars
        self.samples += 1
        if self.samples == 1:
            # The first measurement replaces the prior outright; until more
            # arrive, a quarter of it stands for the spread.
            self._mean = measured
            self._deviation = 0.25 * measured
            return
        weight = max(self._smoothing, 1.0 / self.samples)
        self._deviation += weight * (abs(measured - self._mean) - self._deviation)
        self._mean += weight * (measured - self._mean)


@dataclass(frozen=True)
class Estimate:
    """Seconds from now until a new request's first audio and its last chunk are ready."""

    wait_s: float  # until a worker is free for it (the work ahead drained)
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
) -> Estimate:
    """When a request of ``chars`` (in pieces of at most ``piece_chars``) would be done.

    ``reserved_chars`` is what admitted requests still have to render (queued
    and running chunks alike: a chunk counts until it has finished).
    """
    workers = max(1, workers)
    lanes = max(1, min(workers, parallel))
    wait = reserved_chars * seconds_per_char / workers
    own = chars * seconds_per_char
    piece = min(chars, max(1.0, piece_chars)) * seconds_per_char
    return Estimate(
        wait_s=wait,
        first_audio_s=wait + piece,
        finish_s=wait + (own - piece) / lanes + piece,
    )
