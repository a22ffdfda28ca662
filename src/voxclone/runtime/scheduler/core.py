"""Scheduler: the queue between the speech service and the engine.

Its admission half is ``admission_control.py``, its worker threads
``workers.py``; this module holds the state and the submission of work.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np

from voxclone.errors import Cancelled, Overloaded
from voxclone.runtime.admission import HEADROOM, WorkRate
from voxclone.runtime.scheduler.admission_control import AdmissionControl
from voxclone.runtime.scheduler.breaker import CircuitBreaker
from voxclone.runtime.scheduler.work import (
    PRIORITY_BACKGROUND,
    PRIORITY_NORMAL,
    SchedulerStats,
    Work,
    WorkTiming,
)
from voxclone.runtime.scheduler.workers import WorkerLoop
from voxclone.synth.engine.base import Engine, SynthItem
from voxclone.synth.engine.call_stop import stoppable

# Tenants remembered for fair queueing before the ones with nothing queued are forgotten.
_MAX_TENANT_ROUNDS = 1024


class Scheduler(AdmissionControl, WorkerLoop):
    def __init__(
        self,
        engine: Engine,
        *,
        workers: int = 2,
        queue_size: int = 64,
        max_batch: int = 1,
        max_wait_ms: float = 50.0,
        default_timeout_s: float = 600.0,
        breaker_threshold: int = 5,
        breaker_cooldown_s: float = 10.0,
        on_batch: Callable[[int], None] | None = None,
        on_engine_failure: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        rate: WorkRate | None = None,
        headroom: float = HEADROOM,
    ) -> None:
        self._engine = engine
        self._queue = []
        self._queue_size = queue_size
        self._max_batch = max(1, max_batch if engine.capabilities.native_batching else 1)
        self._max_wait = max_wait_ms / 1000.0
        self._default_timeout = default_timeout_s
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._clock = clock
        self._breaker = CircuitBreaker(breaker_threshold, breaker_cooldown_s, clock)
        self._on_batch = on_batch
        self._on_failure = on_engine_failure
        self._in_flight = 0
        self._fast_lane = engine.capabilities.fast_lane and workers > 1
        self._exclusive = False
        self._completed = 0
        self._rejected = 0
        self._failed = 0
        self._dropped = 0
        self._engine_seconds = 0.0
        self._background_in_flight = 0
        self._background_limit = max(1, workers - 1)
        self._served_round = 0
        self._tenant_round = {}
        self._admissions = {}
        self._listeners_left = {}
        self._running = {}
        self._stops = {}
        self._stops_cond = threading.Condition()
        self.rate = rate if rate is not None else WorkRate()
        self._headroom = headroom
        self._measured_at = None
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._worker, name=f"voxclone-worker-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()
        self._watcher: threading.Thread | None = None
        if stoppable(engine):
            self._watcher = threading.Thread(
                target=self._watch_cancels, name="voxclone-cancel-watch", daemon=True
            )
            self._watcher.start()

    # -- submission ----------------------------------------------------------
    def submit(
        self,
        item: SynthItem,
        *,
        priority: int = PRIORITY_NORMAL,
        timeout_s: float | None = None,
        cancelled: Callable[[], bool] | None = None,
        admitted: bool = False,
        deadline: float | None = None,
        cost: float | None = None,
        on_piece: Callable[[np.ndarray], None] | None = None,
        timing: WorkTiming | None = None,
        tenant: str | None = None,
        listener: str | None = None,
    ) -> Future[np.ndarray]:
        """Queue one item. ``admitted`` marks a later chunk of a request whose
        first chunk was accepted: it skips the capacity check, so a request is
        refused up front or not at all (never halfway, after compute was spent).
        Its extra depth is bounded by the per-request lookahead.

        ``deadline`` (scheduler clock) overrides ``timeout_s``; ``cost`` is the
        item's characters of text (default: its token count), used to learn
        the engine's speed. ``on_piece`` is called from the worker with each
        piece the engine streams (``Engine.stream``) before the future resolves;
        a cancelled item stops at the next piece. ``timing`` is filled in as the
        item is queued, starts and ends. ``tenant`` (the owner the work is
        for) takes turns with other tenants' items of the same priority;
        ``listener`` (:attr:`Work.listener`) lets a lone listener's chunks
        run on all cores."""
        if timing is not None:
            timing.submitted = time.perf_counter()
        if not self._breaker.allow():
            raise Overloaded("synthesis engine is failing; retry shortly", retry_after=5)
        future: Future[np.ndarray] = Future()
        if deadline is None:
            deadline = self._clock() + (timeout_s or self._default_timeout)
        if cost is None:
            cost = float(len(item.token_ids))
        with self._cond:
            if not admitted and len(self._queue) >= self._queue_size:
                self._rejected += 1
                raise Overloaded(
                    "server is at capacity; retry shortly",
                    limit=self._queue_size,
                    retry_after=self.retry_after_s(),
                )
            heapq.heappush(
                self._queue,
                Work(
                    priority,
                    self._next_round_locked(tenant),
                    next(self._seq),
                    item,
                    future,
                    deadline,
                    cancelled,
                    cost,
                    on_piece,
                    timing,
                    listener,
                ),
            )
            self._cond.notify()
        return future

    def _next_round_locked(self, tenant: str | None) -> int:
        key = tenant or ""
        turn = max(self._served_round, self._tenant_round.get(key, 0)) + 1
        self._tenant_round[key] = turn
        if len(self._tenant_round) > _MAX_TENANT_ROUNDS:
            # Tenants whose turn has passed have nothing queued: forget them.
            self._tenant_round = {
                t: r for t, r in self._tenant_round.items() if r > self._served_round
            }
        return turn

    def listener_gone(self, listener: str) -> None:
        """``listener``'s socket has closed: it is no longer between two
        clauses, so it keeps no other request off the all-cores lanes
        (workers.py, LONE_LISTENER_QUIET_S)."""
        with self._cond:
            self._listeners_left.pop(listener, None)

    def calibrate(self, item: SynthItem, cost: float) -> float:
        """Run one real call at background priority so the rate is measured
        before the first burst (the server does this once after start-up);
        returns the seconds it took."""
        started = time.perf_counter()
        self.submit(item, priority=PRIORITY_BACKGROUND, cost=cost).result()
        return time.perf_counter() - started

    def run(self, item: SynthItem, **kwargs: object) -> np.ndarray:
        return self.submit(item, **kwargs).result()  # type: ignore[arg-type]

    @property
    def depth(self) -> int:
        return len(self._queue)

    @property
    def seconds_per_char(self) -> float:
        return self.rate.pessimistic

    def stats(self) -> SchedulerStats:
        with self._cond:
            return SchedulerStats(
                queued=len(self._queue),
                in_flight=self._in_flight,
                completed=self._completed,
                rejected=self._rejected,
                failed=self._failed,
                breaker_open=self._breaker.is_open,
                reserved_chars=self._reserved_locked(),
                backlog_s=self._backlog_locked(),
                seconds_per_char=self.rate.pessimistic,
                rate_samples=self.rate.samples,
                dropped=self._dropped,
                engine_seconds=self._engine_seconds,
            )

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            pending, self._queue = self._queue, []
            self._cond.notify_all()
        with self._stops_cond:
            self._stops_cond.notify_all()
        for work in pending:
            work.future.set_exception(Cancelled("server is shutting down"))
        for thread in self._threads:
            thread.join(timeout=5)
        if self._watcher is not None:
            self._watcher.join(timeout=5)
