"""What the scheduler queues: priorities, one queued item, its timing, the stats."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from voxclone.synth.engine.base import SynthItem

PRIORITY_FIRST_CHUNK = 0
PRIORITY_NORMAL = 1
PRIORITY_BACKGROUND = 2


@dataclass(order=True)
class Work:
    priority: int
    # Fair queueing between tenants within one priority: a tenant's next item
    # gets the round after its previous one (or after the round being served,
    # if it had nothing queued), so tenants take turns chunk by chunk and one
    # tenant's backlog delays another's work by about one chunk per worker.
    round: int
    seq: int
    item: SynthItem = field(compare=False)
    future: Future[np.ndarray] = field(compare=False)
    deadline: float = field(compare=False)
    cancelled: Callable[[], bool] | None = field(compare=False, default=None)
    cost: float = field(compare=False, default=0.0)  # characters, for learning the rate
    # Receives the item's audio piece by piece as the engine makes it (frame
    # engines); the future still resolves to the whole item's audio.
    on_piece: Callable[[np.ndarray], None] | None = field(compare=False, default=None)
    timing: WorkTiming | None = field(compare=False, default=None)
    # Whose ears the audio is for (a voice agent's socket): while every live
    # request belongs to one listener, its chunks run on all cores in turn
    # (workers.py).
    listener: str | None = field(compare=False, default=None)


@dataclass
class WorkTiming:
    """When one submitted item was queued, reached the engine and left it
    (``time.perf_counter`` seconds; None until it happens). Read by the
    speech service's per-stage timing of a stream's first audio."""

    submitted: float = 0.0
    started: float | None = None
    finished: float | None = None


@dataclass
class SchedulerStats:
    queued: int
    in_flight: int
    completed: int
    rejected: int
    failed: int
    breaker_open: bool
    reserved_chars: float = 0.0  # characters admitted requests have still to render
    backlog_s: float = 0.0  # estimated wait for a new request
    seconds_per_char: float = 0.0  # engine seconds per character, one worker (pessimistic)
    rate_samples: int = 0  # engine calls the rate was learned from (0: the cold prior)
    dropped: int = 0  # items dropped before the engine (cancelled or past their deadline)
    engine_seconds: float = 0.0  # wall time workers spent inside the engine
