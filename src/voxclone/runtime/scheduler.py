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
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from voxclone.errors import Cancelled, DeadlineExceeded, Overloaded, PayloadTooLarge
from voxclone.runtime.admission import HEADROOM, FirstAhead, WorkRate, estimate
from voxclone.synth.engine.base import Engine, SynthItem

log = logging.getLogger(__name__)

PRIORITY_FIRST_CHUNK = 0
PRIORITY_NORMAL = 1
PRIORITY_BACKGROUND = 2
# After this long without a learned call, an idle scheduler re-measures: it
# admits a text up to REPROBE_MARGIN x what the old rate says fits.
RATE_STALE_S = 30.0
REPROBE_MARGIN = 4.0
# Tenants remembered for fair queueing before the ones with nothing queued are forgotten.
_MAX_TENANT_ROUNDS = 1024


@dataclass(order=True)
class _Work:
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


class Admission:
    """A request's claim on the engine: characters it has still to render.

    Returned by :meth:`Scheduler.admit`; the request calls :meth:`consume` as
    chunks finish and :meth:`release` when it ends however it ends (done,
    failed, cancelled), so abandoned requests stop counting at once.
    """

    __slots__ = (
        "deadline",
        "must_finish",
        "remaining",
        "first_pending",
        "priority",
        "tenant",
        "_scheduler",
        "__weakref__",
    )

    def __init__(
        self,
        scheduler: Scheduler,
        chars: float,
        deadline: float | None,
        must_finish: bool,
        first_chars: float = 0.0,
        tenant: str | None = None,
    ) -> None:
        self.deadline = deadline  # scheduler clock; None: the scheduler's default timeout
        self.must_finish = must_finish and deadline is not None
        self.remaining = float(chars)
        # The request's first chunk until it is done: it jumps the queue, so a
        # new request's first chunk waits for it (and for running calls) only.
        self.first_pending = min(float(chars), float(first_chars))
        # None: the request's chunks get the usual priorities (first chunk first).
        self.priority: int | None = None
        self.tenant = tenant  # whose work it is (fair queueing between tenants)
        self._scheduler = scheduler

    def consume(self, chars: float) -> None:
        with self._scheduler._cond:
            self.remaining = max(0.0, self.remaining - chars)
            self.first_pending = 0.0

    def release(self) -> None:
        with self._scheduler._cond:
            self.remaining = 0.0
            self.first_pending = 0.0
            self._scheduler._admissions.pop(self, None)


class WindowAdmission(Admission):
    """Background work (speech jobs) that counts only its look-ahead window.

    A job of a whole book has hours of text left, but only ``window``
    characters of it are ever queued on the engine at once, at background
    priority (live requests' chunks go ahead of them): counting the whole text
    would refuse every live request while the job runs. The window shrinks
    only at the text's end.
    """

    __slots__ = ("_left", "_window")

    def __init__(
        self, scheduler: Scheduler, chars: float, window: float, tenant: str | None = None
    ) -> None:
        super().__init__(scheduler, min(chars, window), None, False, tenant=tenant)
        # Every chunk yields to live requests' chunks.
        self.priority = PRIORITY_BACKGROUND
        self._left = float(chars)
        self._window = float(window)

    def consume(self, chars: float) -> None:
        with self._scheduler._cond:
            self._left = max(0.0, self._left - chars)
            self.remaining = min(self._window, self._left)


class CircuitBreaker:
    def __init__(self, threshold: int, cooldown_s: float, clock: Callable[[], float]) -> None:
        self._threshold = threshold
        self._cooldown = cooldown_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_running = False
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._opened_at is not None and self._clock() - self._opened_at < self._cooldown

    def allow(self) -> bool:
        with self._lock:
            if self._opened_at is None:
                return True
            if self._clock() - self._opened_at < self._cooldown or self._trial_running:
                return False
            self._trial_running = True  # half-open: one trial call
            return True

    def record(self, ok: bool) -> None:
        with self._lock:
            self._trial_running = False
            if ok:
                self._failures = 0
                self._opened_at = None
                return
            self._failures += 1
            if self._failures >= self._threshold:
                if self._opened_at is None:
                    log.error("engine circuit opened after %d failures", self._failures)
                self._opened_at = self._clock()


class Scheduler:
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
        self._queue: list[_Work] = []
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
        self._background_in_flight = 0  # background (job) items in engine calls
        self._background_limit = max(1, workers - 1)
        self._served_round = 0  # the fair-queueing round being served
        self._tenant_round: dict[str, int] = {}  # each tenant's last round queued
        # Open admissions, oldest first (a dict keeps insertion order).
        self._admissions: dict[Admission, None] = {}
        # Engine calls now running: seq -> (scheduler clock at start, units,
        # whether it is a request's first chunk, whether it is background work).
        self._running: dict[int, tuple[float, float, bool, bool]] = {}
        self.rate = rate if rate is not None else WorkRate()
        self._headroom = headroom
        self._measured_at: float | None = None  # scheduler clock of the last learned call
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._worker, name=f"voxclone-worker-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

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
        for) takes turns with other tenants' items of the same priority."""
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
                _Work(
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

    def ensure_capacity(self) -> None:
        """Refuse at once when a new request could not be queued (cheap pre-check)."""
        if self._breaker.is_open:
            raise Overloaded("synthesis engine is failing; retry shortly", retry_after=5)
        if len(self._queue) >= self._queue_size:
            with self._cond:
                self._rejected += 1
            raise Overloaded(
                "server is at capacity; retry shortly",
                limit=self._queue_size,
                retry_after=self.retry_after_s(),
            )

    def retry_after_s(self) -> float:
        # Queued work drains at the learned rate; at least one second.
        with self._cond:
            backlog = self._backlog_locked()
        return float(max(1, math.ceil(backlog)))

    def _reserved_locked(self) -> float:
        return sum(a.remaining for a in self._admissions)

    def _live_reserved_locked(self, rate: float) -> float:
        """The admitted work a live request's chunks queue behind: live
        requests' and what the running calls have left; background (job)
        chunks still queued go after every live chunk."""
        now = self._clock()
        live = sum(a.remaining for a in self._admissions if a.priority != PRIORITY_BACKGROUND)
        running_background = sum(
            max(0.0, cost - (now - started) / rate)
            for started, cost, _first, background in self._running.values()
            if background
        )
        return live + running_background

    def _backlog_locked(self) -> float:
        """Estimated seconds until a new request's later chunks would start."""
        return self._reserved_locked() * self.rate.pessimistic / max(1, len(self._threads))

    def _first_ahead_locked(self, rate: float) -> FirstAhead:
        """What a new first chunk waits for: what the running calls have left
        (at ``rate``) and the first chunks admitted before it. A first chunk
        that is running counts as running (the oldest pending ones are the
        ones the workers took)."""
        now = self._clock()
        running = [
            max(0.0, cost - (now - started) / rate)
            for started, cost, _first, _background in self._running.values()
        ]
        first_running = sum(1 for _, _, first, _ in self._running.values() if first)
        queued = [a.first_pending for a in self._admissions if a.first_pending > 0]
        return FirstAhead(running, queued[first_running:])

    def check_wait(self, deadline: float) -> None:
        """Raise Overloaded when the admitted work alone would keep a new
        request from starting by ``deadline`` (cheap: no lock on the engine)."""
        self.ensure_capacity()
        with self._cond:
            rate = self.rate.pessimistic
            wait = self._first_ahead_locked(rate).start(len(self._threads)) * rate
            allowed = deadline - self._clock()
            if wait > allowed:
                self._rejected += 1
                raise self._busy(
                    f"its first audio would start in about {wait:.1f} s", allowed, wait - allowed
                )

    def _busy(self, needed: str, allowed: float, late: float) -> Overloaded:
        # ``late`` is by how much the estimate misses the budget; the work
        # ahead drains by a second every second, so that is when the same
        # request would just fit.
        return Overloaded(
            f"server is busy: {needed}, more than the {max(0.0, allowed):.1f} s this "
            f"request's deadline allows; retry in {max(1, math.ceil(late))} s",
            retry_after=float(max(1, math.ceil(late))),
        )

    def admit(
        self,
        chars: float,
        deadline: float | None,
        *,
        must_finish: bool = True,
        first_audio_s: float | None = None,
        piece_chars: float | None = None,
        parallel: int = 2,
        first_piece_chars: float | None = None,
        tenant: str | None = None,
        replacing: Admission | None = None,
    ) -> Admission:
        """Reserve ``chars`` units of rendering for a request due by ``deadline``.

        Refuses at once (503 + Retry-After) only when, with the work already
        admitted, the estimate at the learned rate (:func:`estimate`) says the
        request would be late: not finished by ``deadline`` x the headroom
        (``must_finish``: whole files, streams whose client set a deadline),
        or its first audio later than ``first_audio_s`` x the headroom. Cheap:
        sums over the open admissions and running calls under a lock that
        workers hold only for bookkeeping; no I/O.

        ``piece_chars`` is the longest chunk the text becomes (default: all of
        it), ``first_piece_chars`` its first chunk (default: a whole piece),
        ``parallel`` how many of its chunks run at once (the look-ahead).
        Before any call was measured the rate is an optimistic prior, so a
        cold server refuses only what even a fast machine could not do. A
        text too long for its deadline even alone gets 413 (retrying would
        never help), judged with the fastest reading of the rate. Without a deadline
        only the queue bound applies; the reservation still counts in the
        backlog others see.

        ``replacing``: a provisional admission of the same request (taken by
        :meth:`precheck` on a lower bound) that this one replaces, judged
        without it; it is released either way.
        """
        try:
            self.ensure_capacity()
        except BaseException:
            if replacing is not None:
                replacing.release()
            raise
        workers = max(1, len(self._threads))
        piece = chars if piece_chars is None else min(chars, piece_chars)
        first = piece if first_piece_chars is None else min(piece, first_piece_chars)
        with self._cond:
            if replacing is not None:
                replacing.remaining = replacing.first_pending = 0.0
                self._admissions.pop(replacing, None)
            if deadline is not None:
                allowed = deadline - self._clock()
                reserved = self._reserved_locked()
                if must_finish:
                    # A rate measured during a load spike would refuse the same
                    # text forever (nothing admitted, nothing re-measured): an
                    # idle scheduler whose last measurement is old (or that has
                    # none: the prior is a fast machine's) refuses only texts
                    # far too long and lets a borderline one re-measure.
                    stale = self._measured_at is None or (
                        self._clock() - self._measured_at > RATE_STALE_S
                    )
                    margin = REPROBE_MARGIN if reserved == 0 and stale else 1.0
                    self._refuse_too_long(chars, piece, allowed * margin, workers, parallel)
                late = (reserved > 0 or bool(self._running)) and self._lateness(
                    chars, piece, first, allowed, workers, parallel, must_finish, first_audio_s
                )
                if late:
                    self._rejected += 1
                    raise late
            admission = Admission(
                self, chars, deadline, must_finish, first_chars=first, tenant=tenant
            )
            self._admissions[admission] = None
        return admission

    def precheck(
        self,
        chars: float,
        deadline: float,
        *,
        must_finish: bool,
        first_audio_s: float | None,
        piece_chars: float,
        parallel: int = 2,
        first_piece_chars: float | None = None,
    ) -> Admission:
        """Raise Overloaded when a request of at least ``chars`` units would be
        late, as :meth:`admit` would; else reserve ``chars`` provisionally
        (cheap: for the event loop, before any thread; the caller passes a
        lower bound, and replaces the reservation once the request is priced:
        :meth:`admit` ``replacing=``), so a flood arriving at once sees itself."""
        self.ensure_capacity()
        workers = max(1, len(self._threads))
        small = min(chars, piece_chars)
        first = small if first_piece_chars is None else min(chars, first_piece_chars)
        with self._cond:
            if self._reserved_locked() > 0 or self._running:
                self._refuse_if_late_however_cut(
                    chars, small, first, deadline, workers, parallel, must_finish, first_audio_s
                )
            admission = Admission(self, chars, deadline, must_finish, first_chars=first)
            self._admissions[admission] = None
        return admission

    def _refuse_if_late_however_cut(
        self,
        chars: float,
        small: float,
        first: float,
        deadline: float,
        workers: int,
        parallel: int,
        must_finish: bool,
        first_audio_s: float | None,
    ) -> None:
        """Overloaded when a request of ``chars`` is late however its text is
        cut (lock held)."""
        allowed = deadline - self._clock()
        # Late only if late however the rest of the text is cut: in small
        # pieces (all but the first wait behind the admitted work, two at a
        # time) and as one chunk after the first.
        refusals = [
            self._lateness(
                chars,
                size,
                first,
                allowed,
                workers,
                parallel,
                must_finish,
                first_audio_s,
            )
            for size in (small, chars)
        ]
        late = [r for r in refusals if r is not None]
        if len(late) == len(refusals):
            self._rejected += 1
            raise min(late, key=lambda r: r.retry_after or 0.0)

    def _lateness(
        self,
        chars: float,
        piece: float,
        first: float,
        allowed: float,
        workers: int,
        parallel: int,
        must_finish: bool,
        first_audio_s: float | None,
    ) -> Overloaded | None:
        """The refusal the estimate calls for, if any (lock held)."""
        rate = self.rate.pessimistic
        est = estimate(
            reserved_chars=self._live_reserved_locked(rate),
            chars=chars,
            piece_chars=piece,
            seconds_per_char=rate,
            workers=workers,
            parallel=parallel,
            first_ahead=self._first_ahead_locked(rate),
            first_piece_chars=first,
        )
        budget = allowed * self._headroom
        if must_finish and est.finish_s > budget:
            return self._busy(
                f"with the work already admitted it would be done in about {est.finish_s:.1f} s",
                budget,
                est.finish_s - budget,
            )
        first_budget = budget
        if first_audio_s is not None:
            first_budget = min(budget, first_audio_s * self._headroom)
        if est.first_audio_s > first_budget:
            return self._busy(
                f"with the work already admitted its first audio would come in about "
                f"{est.first_audio_s:.1f} s",
                first_budget,
                est.first_audio_s - first_budget,
            )
        return None

    def admit_window(self, chars: float, window: float, tenant: str | None = None) -> Admission:
        """Admit background work of ``chars`` that keeps at most ``window`` of them
        queued at once (:class:`WindowAdmission`); no deadline, never refused here
        (the queue bound still applies when its chunks are submitted)."""
        admission = WindowAdmission(self, chars, window, tenant)
        with self._cond:
            self._admissions[admission] = None
        return admission

    def calibrate(self, item: SynthItem, cost: float) -> float:
        """Run one real call at background priority so the rate is measured
        before the first burst (the server does this once after start-up);
        returns the seconds it took."""
        started = time.perf_counter()
        self.submit(item, priority=PRIORITY_BACKGROUND, cost=cost).result()
        return time.perf_counter() - started

    def _refuse_too_long(
        self, chars: float, piece: float, allowed: float, workers: int, parallel: int
    ) -> None:
        """413 when even alone the text could not be done in ``allowed`` seconds."""
        # A permanent refusal must be certain: judged as if every chunk ran
        # alone on all cores (the fast lane), the most optimistic reading of
        # the measured rate. Borderline texts are admitted on an idle server.
        alone = estimate(
            reserved_chars=0.0,
            chars=chars,
            piece_chars=piece,
            seconds_per_char=self.rate.mean / workers,
            workers=workers,
            parallel=parallel,
        )
        if alone.finish_s <= allowed:
            return
        self._rejected += 1
        per_char = alone.finish_s / max(1.0, chars)
        fits = int(max(0.0, allowed) / per_char)
        raise PayloadTooLarge(
            f"this text needs at least {alone.finish_s:.0f} s of synthesis, more than the "
            f"request deadline of {max(0.0, allowed):.0f} s; send at most about {fits} "
            "characters, or submit it as a speech job (POST /v1/jobs/speech)",
            field="text",
            limit=fits,
            value=int(chars),
        )

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
        for work in pending:
            work.future.set_exception(Cancelled("server is shutting down"))
        for thread in self._threads:
            thread.join(timeout=5)

    # -- workers -------------------------------------------------------------
    def _take_batch(self) -> tuple[list[_Work], bool] | None:
        """Next batch, and whether it runs alone on every core (fast lane)."""
        with self._cond:
            # An exclusive call owns all cores: other workers wait for it.
            while (
                not self._queue or self._exclusive or self._background_full_locked()
            ) and not self._stopping:
                self._cond.wait()
            if self._stopping:
                return None
            batch = [heapq.heappop(self._queue)]
            self._served_round = max(self._served_round, batch[0].round)
            if (
                self._fast_lane
                and batch[0].priority == PRIORITY_FIRST_CHUNK
                and self._in_flight == 0
                and not self._queue
            ):
                # Idle server, first audio of a stream: one call on all cores
                # beats two single-thread calls for time to first audio.
                self._exclusive = True
                self._in_flight += 1
                return batch, True
            if self._max_batch > 1:
                until = self._clock() + self._max_wait
                while len(batch) < self._max_batch:
                    if self._queue:
                        batch.append(heapq.heappop(self._queue))
                        self._served_round = max(self._served_round, batch[-1].round)
                        continue
                    remaining = until - self._clock()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
            self._in_flight += len(batch)
            self._background_in_flight += sum(w.priority == PRIORITY_BACKGROUND for w in batch)
            return batch, False

    def _background_full_locked(self) -> bool:
        """Whether the next item is background work that must wait: speech
        jobs may occupy all workers but one, so a live request's chunk never
        waits for a background chunk to end (a 510-token job chunk is ~15 s
        on this host; two job slots on two workers made live streams'
        first audio wait for one)."""
        return (
            bool(self._queue)
            and self._queue[0].priority == PRIORITY_BACKGROUND
            and self._background_in_flight >= self._background_limit
        )

    def _live(self, batch: list[_Work]) -> list[_Work]:
        now = self._clock()
        live = []
        dropped = 0
        for work in batch:
            if work.future.cancelled() or (work.cancelled is not None and work.cancelled()):
                dropped += 1
                if not work.future.cancel():
                    work.future.set_exception(Cancelled("request cancelled"))
            elif now > work.deadline:
                dropped += 1
                work.future.set_exception(DeadlineExceeded("request took too long"))
            elif work.future.set_running_or_notify_cancel():
                live.append(work)
            else:
                dropped += 1
        if dropped:
            with self._cond:
                self._dropped += dropped
        return live

    def _worker(self) -> None:
        while True:
            taken = self._take_batch()
            if taken is None:
                return
            batch, exclusive = taken
            live = self._live(batch)
            try:
                if live:
                    self._execute(live, exclusive)
            finally:
                with self._cond:
                    self._in_flight -= len(batch)
                    background = sum(w.priority == PRIORITY_BACKGROUND for w in batch)
                    self._background_in_flight -= background
                    if exclusive or background:
                        self._exclusive = False
                        self._cond.notify_all()

    def _streamed(self, work: _Work) -> np.ndarray:
        """Run one item through ``Engine.stream``, handing each piece on as it comes."""
        assert work.on_piece is not None
        stop = threading.Event()
        pieces: list[np.ndarray] = []
        stream = self._engine.stream(work.item, stop=stop)
        try:
            for piece in stream:
                pieces.append(piece)
                work.on_piece(piece)
                if work.future.cancelled() or (work.cancelled is not None and work.cancelled()):
                    # The client left: the engine stops at its next piece.
                    stop.set()
                    raise Cancelled("request cancelled")
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)

    def _execute(self, live: list[_Work], exclusive: bool) -> None:
        if self._on_batch is not None:
            self._on_batch(len(live))
        items = [w.item for w in live]
        started = time.perf_counter()
        for work in live:
            if work.timing is not None:
                work.timing.started = started
        with self._cond:
            now = self._clock()
            for work in live:
                self._running[work.seq] = (
                    now,
                    work.cost,
                    work.priority == PRIORITY_FIRST_CHUNK,
                    work.priority == PRIORITY_BACKGROUND,
                )
        try:
            self._call_engine(live, items, exclusive, started)
        finally:
            with self._cond:
                for work in live:
                    self._running.pop(work.seq, None)

    def _call_engine(
        self, live: list[_Work], items: list[SynthItem], exclusive: bool, started: float
    ) -> None:
        try:
            if len(live) == 1 and live[0].on_piece is not None:
                outputs = [self._streamed(live[0])]
            elif exclusive:
                outputs = self._engine.synthesize(items, exclusive=True)
            else:
                outputs = self._engine.synthesize(items)
        except Cancelled as exc:
            with self._cond:
                self._dropped += 1
                self._engine_seconds += time.perf_counter() - started
            live[0].future.set_exception(exc)
            return
        except Exception as exc:  # engine errors become failed futures, never a dead worker
            self._breaker.record(ok=False)
            with self._cond:
                self._failed += len(live)
            if self._on_failure is not None:
                self._on_failure()
            log.exception("engine call failed")
            with self._cond:
                self._engine_seconds += time.perf_counter() - started
            for work in live:
                work.future.set_exception(exc)
            return
        self._breaker.record(ok=True)
        finished = time.perf_counter()
        elapsed = finished - started
        for work in live:
            if work.timing is not None:
                work.timing.finished = finished
        cost = sum(w.cost for w in live)
        with self._cond:
            self._completed += len(live)
            self._engine_seconds += elapsed
            # Under the same lock admission reads it. An all-cores call is
            # counted as if every worker's core had shared it (pessimistic).
            self.rate.observe(elapsed, cost, cores=len(self._threads) if exclusive else 1.0)
            self._measured_at = self._clock()
        for work, audio in zip(live, outputs, strict=True):
            work.future.set_result(audio)
