"""How fast a clone speaks: towards the reference's own pace, shrunk to the crowd.

The reference's speaking rate (``prosody.speaking_rate``: energy peaks per
second of speech, about syllables per second) is a noisy read of a person's
pace. Over the 19 evaluation speakers with several recordings, predicting
the pace of a speaker's *other* clips from one clip missed by 0.150 (RMS of
the log rate) with the clip's own rate and by 0.134 with the population's,
and by 0.119 with the shrunk mix used here, its weight refitted without the
held-out speaker (``studies/rate_follow.py``, leave one speaker out). The
clone's speed is that target over the rate the clone has on its own probe
sentence, kept within :data:`SPEED_LIMITS`.
"""

from __future__ import annotations

import math

# Log-mean rate of the evaluation recordings (peaks per second of speech) and
# the weight of one clip's own rate against it; both from studies/rate_follow.py
# over all dev speakers (its leave-one-speaker-out run refits them per fold).
POPULATION_RATE = 5.13
RATE_WEIGHT = 0.47
# Within ±12 %, time-scaling kept Whisper's WER of the built-in voices at 0
# (docs/benchmarks.md "Speed accuracy": 0.8-1.25 unchanged); a clone should
# sound like its speaker at an ordinary pace, not be slowed or rushed.
SPEED_LIMITS = (0.88, 1.12)


def target_rate(
    reference_rate: float, *, population: float = POPULATION_RATE, weight: float = RATE_WEIGHT
) -> float:
    """The pace to give a clone of a reference that measured ``reference_rate``."""
    if reference_rate <= 0:
        return population
    return math.exp(weight * math.log(reference_rate) + (1.0 - weight) * math.log(population))


def follow_speed(
    reference_rate: float,
    clone_rate: float,
    *,
    population: float = POPULATION_RATE,
    weight: float = RATE_WEIGHT,
    limits: tuple[float, float] = SPEED_LIMITS,
) -> float:
    """The speed (real-rate multiplier) that moves a clone from ``clone_rate``
    towards the reference's pace; 1.0 when either rate is unknown."""
    if reference_rate <= 0 or clone_rate <= 0:
        return 1.0
    wanted = target_rate(reference_rate, population=population, weight=weight) / clone_rate
    return min(max(wanted, limits[0]), limits[1])
