"""The worker threads: take a batch, drop dead work, call the engine, learn its rate."""

from __future__ import annotations

import contextlib
import heapq
import logging
import threading
import time
from concurrent.futures import Future, InvalidStateError

import numpy as np

from voxclone.errors import Cancelled, DeadlineExceeded
from voxclone.runtime.scheduler.fields import SchedulerFields
from voxclone.runtime.scheduler.work import PRIORITY_BACKGROUND, PRIORITY_FIRST_CHUNK, Work
from voxclone.synth.engine.base import SynthItem
from voxclone.synth.engine.call_stop import CallStop, StoppableEngine, stoppable

log = logging.getLogger(__name__)

# How often the cancel watcher looks at running calls' requests. The budget
# from a barge-in to an idle engine is 100 ms; ONNX Runtime ends a
# terminated run 1-34 ms after the flag (185-token Kokoro chunk, load 14).
CANCEL_POLL_S = 0.01


# The longest chunk (units: phoneme tokens) a lone listener runs on all cores:
# a 12-15 word clause; "It looks fine today, and nothing needs to change
# before tomorrow." is 62.
LONE_LISTENER_MAX_UNITS = 64.0
# Another listener whose request ended less than this ago is between two of
# its clauses (the next is admitted once the last one's audio has started):
# taking both cores then made its next clause wait 0.48 s (two sessions,
# 2026-12-07).
LONE_LISTENER_QUIET_S = 2.0


def _gone(work: Work) -> bool:
    return work.future.cancelled() or (work.cancelled is not None and work.cancelled())


class WorkerLoop(SchedulerFields):
    """The worker half of :class:`~voxclone.runtime.scheduler.core.Scheduler`:
    each thread makes one engine call at a time (ONNX Runtime releases the
    GIL, so threads give real parallelism)."""

    def _take_batch(self) -> tuple[list[Work], bool] | None:
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
                and self._in_flight == 0
                and (
                    self._first_chunk_alone_locked(batch[0]) or self._lone_listener_locked(batch[0])
                )
            ):
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

    def _first_chunk_alone_locked(self, work: Work) -> bool:
        """A request's first chunk (a stream's, or a whole file's) with no other
        request admitted or starting."""
        # Idle server, first audio of a stream: one call on all cores
        # beats two single-thread calls for time to first audio. Later
        # chunks queued behind it (the stream's own tail, submitted with
        # it) wait for this one short call: run beside it on one thread
        # each, the first chunk took 0.62 s instead of 0.37 s (3 words,
        # 2 cores, 2026-12-06) and a voice agent heard it 0.25 s later.
        # Another stream's first chunk still shares the cores with it,
        # and so does any first chunk while another live request is
        # admitted (its chunks not queued yet: text still being
        # prepared). In a flood of 40, the first of 4 admitted requests
        # took the lane alone (6.4 s where one thread takes 9.2: 1.45x
        # for two cores) while the other three waited, so the last one
        # ended 27.2 s after its start against an estimate of 18.5 s
        # (admission plans two workers side by side): the 504s of
        # tests/e2e/test_capacity.py's flood (2026-12-07).
        # Nor while another voice agent's socket is between two clauses (its
        # request ended under LONE_LISTENER_QUIET_S ago): at 2 sessions one
        # session's next clause took both cores for 0.50 s while the other's,
        # queued 26 ms later, waited for it with a core idle, and its listener
        # heard 0.9 s of silence (server trace, 2026-12-07).
        return (
            work.priority == PRIORITY_FIRST_CHUNK
            and not (self._queue and self._queue[0].priority == PRIORITY_FIRST_CHUNK)
            and self._live_admissions_locked() <= 1
            and not self._other_listener_between_clauses_locked(work.listener)
        )

    def _lone_listener_locked(self, work: Work) -> bool:
        """Every live request admitted or queued is for ``work``'s listener
        (one voice agent's socket): its chunks come one after the other
        anyway (each clause plays after the last), so each takes every core.
        On one thread a sentence rendered at 0.74 s per second of audio and
        a session's second sentence came 1.9-3.6 s after its first had
        played out; on both, 0.42 s per second (2 cores, 2026-12-07).

        Only chunks up to LONE_LISTENER_MAX_UNITS: a request arriving while
        one runs waits for it (the other core is held), so the wait is
        bounded by a clause's render (~1.5 s on this host), not a 510-token
        chunk's (~9 s)."""
        listener = work.listener
        if (
            listener is None
            or work.priority == PRIORITY_BACKGROUND
            or work.cost > LONE_LISTENER_MAX_UNITS
        ):
            return False
        return (
            all(
                a.listener == listener
                for a in self._admissions
                if a.remaining > 0 and a.priority != PRIORITY_BACKGROUND
            )
            and all(
                w.listener == listener for w in self._queue if w.priority != PRIORITY_BACKGROUND
            )
            and not self._other_listener_between_clauses_locked(listener)
        )

    def _other_listener_between_clauses_locked(self, listener: str | None) -> bool:
        """Whether a request of a listener other than ``listener`` ended less
        than LONE_LISTENER_QUIET_S ago: that socket's next clause is coming."""
        now = self._clock()
        return any(
            name != listener and now - at < LONE_LISTENER_QUIET_S
            for name, at in self._listeners_left.items()
        )

    def _live_admissions_locked(self) -> int:
        """Admitted live requests with work left (background jobs aside)."""
        return sum(
            1 for a in self._admissions if a.remaining > 0 and a.priority != PRIORITY_BACKGROUND
        )

    def _live(self, batch: list[Work]) -> list[Work]:
        now = self._clock()
        live = []
        dropped = 0
        for work in batch:
            if work.future.cancelled():
                dropped += 1  # its owner gave it up
            elif work.cancelled is not None and work.cancelled():
                dropped += 1
                _fail_cancelled(work.future)
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

    def _streamed(self, work: Work, exclusive: bool) -> np.ndarray:
        """Run one item through ``Engine.stream``, handing each piece on as it comes."""
        assert work.on_piece is not None
        stop = threading.Event()
        pieces: list[np.ndarray] = []
        stream = self._engine.stream(work.item, stop=stop, exclusive=exclusive)
        try:
            for piece in stream:
                pieces.append(piece)
                work.on_piece(piece)
                if _gone(work):
                    # The client left: the engine stops at its next piece.
                    stop.set()
                    raise Cancelled("request cancelled")
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)

    def _cuttable(self, work: Work) -> bool:
        return work.cancelled is not None and stoppable(self._engine)

    def _stoppable(
        self, work: Work, engine: StoppableEngine, items: list[SynthItem], exclusive: bool
    ) -> list[np.ndarray]:
        """A call for one request that the cancel watcher cuts if the request
        is cancelled while it runs (barge-in, a departed client)."""
        stop = CallStop()
        with self._stops_cond:
            self._stops[work.seq] = (work, stop)
            self._stops_cond.notify()
        try:
            return engine.synthesize(items, exclusive=exclusive, stop=stop)
        finally:
            with self._stops_cond:
                self._stops.pop(work.seq, None)

    def _watch_cancels(self) -> None:
        """One thread per scheduler: while cuttable calls run, poll their
        requests' cancel flags (callables, so a flag cannot notify) every
        CANCEL_POLL_S and stop the call of one that was cancelled."""
        while True:
            with self._stops_cond:
                while not self._stops and not self._stopping:
                    self._stops_cond.wait()
                if self._stopping:
                    return
                watched = list(self._stops.values())
            for work, stop in watched:
                try:
                    if _gone(work):
                        stop.stop()
                except Exception:  # a failing flag must not end the watcher
                    log.exception("cancel flag failed")
            time.sleep(CANCEL_POLL_S)

    def _execute(self, live: list[Work], exclusive: bool) -> None:
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
        self, live: list[Work], items: list[SynthItem], exclusive: bool, started: float
    ) -> None:
        one = live[0] if len(live) == 1 else None
        try:
            if (
                one is not None
                and one.on_piece is not None
                and (exclusive or not self._cuttable(one))
            ):
                outputs = [self._streamed(one, exclusive)]
            elif one is not None and one.cancelled is not None and stoppable(self._engine):
                # Only a request that can be cancelled is watched (a running
                # future cannot be cancelled; its flag is the only way).
                outputs = self._stoppable(one, self._engine, items, exclusive)
                if one.on_piece is not None:
                    # A chunk engine's head piece off the fast lane: the whole
                    # chunk, in one call the cancel watcher can cut.
                    one.on_piece(outputs[0])
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
            if _gone(work):
                # Cancelled inside a call shared with other requests, which
                # is not cut for it: only its own result is dropped.
                work.future.set_exception(Cancelled("request cancelled"))
            else:
                work.future.set_result(audio)


def _fail_cancelled(future: Future[np.ndarray]) -> None:
    """A queued item whose request was cancelled ends with the product's
    ``Cancelled``, which every caller handles. Cancelling its future instead
    raised ``concurrent.futures.CancelledError`` in the waiter: a realtime
    clause's render thread ended with it and a barge-in's socket lost its
    other context and its close frame (CI, stop 55; 4 of 49 barge-ins here).
    An owner that cancelled it at the same instant already knows."""
    with contextlib.suppress(InvalidStateError):
        future.set_exception(Cancelled("request cancelled"))
