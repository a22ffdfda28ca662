"""Scheduler between the service and the engine.

* bounded priority queue: a full queue refuses at once (503 + Retry-After)
  instead of letting latency grow without limit;
* a fixed pool of worker threads, each making one engine call at a time
  (ONNX Runtime releases the GIL, so threads give real parallelism);
* dynamic batching: a worker that takes an item waits up to ``max_wait_ms``
  for more, up to ``max_batch``, when the engine batches natively;
* priorities: first chunks of streams jump the queue so time-to-first-audio
  stays low while long texts are being rendered;
* deadlines and cancellation: expired or cancelled items are dropped before
  they reach the engine;
* admission by queued work, not request count: each admitted request holds
  an :class:`Admission` reserving its text's characters until it ends; the
  engine seconds per character are learned from finished calls
  (:class:`voxclone.runtime.admission.WorkRate`, pessimistic until measured),
  and :func:`voxclone.runtime.admission.estimate` turns reserved work plus the
  new request into when its first audio and its last chunk would be ready.
  A request that could not finish (whole files, and streams whose client set
  a deadline) or deliver first audio within its budget is refused at once
  with 503 + Retry-After instead of timing out later after compute was spent
  on it;
* circuit breaker: after ``breaker_threshold`` consecutive engine failures
  calls fail fast for ``breaker_cooldown_s``, then one trial call is let
  through and success closes the circuit again.

The package: ``core.py`` (the :class:`Scheduler`, submission, stats),
``admission_control.py`` (admit, precheck, refusals), ``admissions.py`` (the
:class:`Admission` a request holds), ``workers.py`` (the worker threads),
``breaker.py`` (:class:`CircuitBreaker`), ``work.py`` (priorities, queued
items, :class:`WorkTiming`, :class:`SchedulerStats`), ``fields.py`` (the
state the parts share).
"""

from voxclone.runtime.scheduler.admission_control import RATE_STALE_S, REPROBE_MARGIN
from voxclone.runtime.scheduler.admitted import Admission, WindowAdmission
from voxclone.runtime.scheduler.breaker import CircuitBreaker
from voxclone.runtime.scheduler.core import Scheduler
from voxclone.runtime.scheduler.work import (
    PRIORITY_BACKGROUND,
    PRIORITY_FIRST_CHUNK,
    PRIORITY_NORMAL,
    SchedulerStats,
    WorkTiming,
)

__all__ = [
    "PRIORITY_BACKGROUND",
    "PRIORITY_FIRST_CHUNK",
    "PRIORITY_NORMAL",
    "RATE_STALE_S",
    "REPROBE_MARGIN",
    "Admission",
    "CircuitBreaker",
    "Scheduler",
    "SchedulerStats",
    "WindowAdmission",
    "WorkTiming",
]
