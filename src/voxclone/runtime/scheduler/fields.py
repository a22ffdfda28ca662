"""The scheduler's state, declared once for the parts that share it.

:class:`~voxclone.runtime.scheduler.core.Scheduler` sets every field in its
``__init__``; admission control (``admission_control.py``) and the worker
loop (``workers.py``) read and change them under ``_cond``. Declaring them
here lets each part be type-checked on its own.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from voxclone.runtime.admission import WorkRate
from voxclone.runtime.scheduler.breaker import CircuitBreaker
from voxclone.runtime.scheduler.work import Work
from voxclone.synth.engine.base import Engine
from voxclone.synth.engine.call_stop import CallStop

if TYPE_CHECKING:
    from voxclone.runtime.scheduler.admitted import Admission


class SchedulerFields:
    _engine: Engine
    _queue: list[Work]  # a heap: priority, fair-queueing round, arrival
    _queue_size: int
    _max_batch: int
    _max_wait: float  # seconds a batching worker waits for more items
    _default_timeout: float
    # Guards everything below; workers wait on it for work.
    _cond: threading.Condition
    _seq: itertools.count[int]
    _clock: Callable[[], float]
    _breaker: CircuitBreaker
    _on_batch: Callable[[int], None] | None
    _on_failure: Callable[[], None] | None
    _in_flight: int
    _fast_lane: bool
    _exclusive: bool  # an all-cores call is running: other workers wait
    _completed: int
    _rejected: int
    _failed: int
    _dropped: int
    _engine_seconds: float
    _background_in_flight: int  # background (job) items in engine calls
    _background_limit: int
    _served_round: int  # the fair-queueing round being served
    _tenant_round: dict[str, int]  # each tenant's last round queued
    # Open admissions, oldest first (a dict keeps insertion order).
    _admissions: dict[Admission, None]
    # When each listener's last request ended (scheduler clock): one that
    # ended a moment ago is between clauses, not gone (workers.py).
    _listeners_left: dict[str, float]
    # Engine calls now running: seq -> (scheduler clock at start, units,
    # whether it is a request's first chunk, whether it is background work).
    _running: dict[int, tuple[float, float, bool, bool]]
    # Running one-request calls an engine can cut (call_stop.py): seq ->
    # (the work, its stop). The cancel watcher waits on its own condition,
    # so it never takes a notify meant for a worker.
    _stops: dict[int, tuple[Work, CallStop]]
    _stops_cond: threading.Condition
    rate: WorkRate
    _headroom: float
    _measured_at: float | None  # scheduler clock of the last learned call
    _stopping: bool
    _threads: list[threading.Thread]
