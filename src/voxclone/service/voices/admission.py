"""Enrollment admission: a bounded, first-come-first-served queue of
enrollments with their own share of the engine, refusing at once (503 +
Retry-After) what it could not answer in time.

Why (issue 45): an enrollment's renders (pitch calibration, tone match, the
quality report) go through the scheduler like speech, and every enrollment
ran at once: 10 concurrent ones shared the two workers, so all of them were
slow together (the first answers after 147 s and 162 s, 8 clients timed out
at 180 s, and 3 of those still stored voices nobody learned the id of).
Here at most ``slots`` enrollments render at a time, in arrival order, so
each is as fast as alone and the next starts when one ends; at most
``queue`` wait for a slot, and one whose answer the estimate puts past its
deadline is refused before it waits (as speech admission refuses a request
that would be late: runtime/scheduler/admission_control.py).

``wait=False`` enrollments (the atlas lookup, ~0.3 s; their renders go to
the report job queue, which runs one at a time) take no slot: they count
towards the same bound of enrollments in flight but never wait behind a
rendering one, so they answer at once.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from voxclone.errors import Cancelled, Overloaded
from voxclone.runtime.admission import HEADROOM, FirstAhead

# Seconds a full enrollment is assumed to take before one was measured: the
# fast end (a warm 2-core host renders the ~5 s of probes of one in about 5 s;
# bench/clone_latency.py). Optimistic on purpose, as speech admission's
# prior: a refusal must be sure, and the first enrollment replaces it.
ENROLL_PRIOR_S = 3.0
# The estimate is the median of this many recent enrollments: one that ran
# while the machine was swamped does not refuse the ones after it.
DURATION_WINDOW = 8
# How often a queued enrollment looks whether its client is still there.
TURN_POLL_S = 0.05
# The client-gone check of the enrollment this thread renders for (None
# outside one): the cloning renders hand it to the scheduler.
_CANCELLED: ContextVar[Callable[[], bool] | None] = ContextVar("enrollment_cancelled", default=None)


def enrollment_cancel_check() -> Callable[[], bool] | None:
    """The client-gone check of the enrollment the calling thread works for
    (None outside one: report jobs, refinement, added recordings). Read it in
    that thread and hand it to the scheduler with each cloning render
    (cloning_setup.py): the scheduler's worker threads call it, and drop the
    render once the client left, so an abandoned enrollment stops at its next
    render, not after the whole calibration and report (25-85 s at load 11 on
    2 cores, all of it holding the slot the next one waits for)."""
    return _CANCELLED.get()


@contextmanager
def cancelled_by(check: Callable[[], bool] | None) -> Iterator[None]:
    """Within the block (in this thread), :func:`enrollment_cancel_check` is ``check``."""
    token = _CANCELLED.set(check)
    try:
        yield
    finally:
        _CANCELLED.reset(token)


class EnrollTicket:
    """One enrollment's place: queued until its turn (``wait_turn``), then
    holding a slot until ``release`` (idempotent; a draft never queues)."""

    def __init__(self, queue: EnrollmentQueue, *, renders: bool) -> None:
        self._queue = queue
        self.renders = renders  # a full enrollment (wait=True): takes a slot
        self.released = False
        # Its client-gone check (set by wait_turn): a running enrollment whose
        # client left ends at its next render, so those behind it do not
        # wait for the rest of its estimate.
        self.cancelled: Callable[[], bool] | None = None

    def wait_turn(self, cancelled: Callable[[], bool] | None = None) -> None:
        """Block until a slot is free for this enrollment (at once for a
        draft); raises Cancelled, giving up its place, once ``cancelled()``."""
        self.cancelled = cancelled
        if self.renders:
            self._queue._wait_turn(self, cancelled)

    def release(self, *, completed: bool = False) -> None:
        """Give the place or slot back; ``completed``: the enrollment ran to
        its end, so its duration is learned."""
        self._queue._release(self, completed)


def _gone(ticket: EnrollTicket) -> bool:
    return ticket.cancelled is not None and ticket.cancelled()


class EnrollmentQueue:
    def __init__(
        self,
        *,
        slots: int = 1,
        queue: int = 4,
        clock: Callable[[], float] = time.monotonic,
        prior_s: float = ENROLL_PRIOR_S,
    ) -> None:
        """``slots`` enrollments render at once, ``queue`` more may wait;
        ``clock`` is the deadlines' clock (time.monotonic, as speech's)."""
        self.slots = max(1, slots)
        self.queue = max(0, queue)
        self._clock = clock
        self._prior_s = prior_s
        self._cond = threading.Condition()
        self._waiting: deque[EnrollTicket] = deque()
        self._running: dict[EnrollTicket, float] = {}  # ticket -> started (clock)
        self._drafts = 0
        self._recent: deque[float] = deque(maxlen=DURATION_WINDOW)
        self.rejected = 0

    @property
    def expected_s(self) -> float:
        """What one full enrollment takes: the median of the recent ones."""
        with self._cond:
            return self._expected_locked()

    def admit(self, *, renders: bool, deadline: float | None = None) -> EnrollTicket:
        """A place for an enrollment, or Overloaded (503 + Retry-After) at once.

        Cheap (a lock and a few sums, no I/O): the route calls it on the event
        loop before any audio work. A full enrollment (``renders``) is refused
        when ``queue`` already wait, or when the estimate says its answer would
        come later than ``deadline`` (clock time) x the headroom. A draft is
        refused only when ``slots + queue`` enrollments are in flight."""
        with self._cond:
            now = self._clock()
            expected = self._expected_locked()
            ahead = self._ahead_locked(now, expected)
            start_s = ahead.start(self.slots)
            in_flight = len(self._waiting) + len(self._running) + self._drafts
            # Admitted ones that a free slot will take at once are not queued.
            queued = len(self._waiting) - max(0, self.slots - len(self._running))
            # A place frees when the first running enrollment ends.
            ends_s = min(ahead.running, default=0.0)
            if renders and queued >= self.queue:
                self._refuse(
                    f"the enrollment queue is full ({queued} waiting for {self.slots} running)",
                    ends_s,
                )
            if not renders and in_flight >= self.slots + self.queue:
                self._refuse(f"{in_flight} enrollments are in progress", ends_s)
            # Only waiting can make it late: with a slot free, a slow host's
            # enrollment is admitted whatever the estimate (refusing it would
            # refuse every retry too: one took 57 s alone at load 11 on 2
            # cores, past 60 s x HEADROOM, and the idle queue refused all 10).
            if renders and deadline is not None and start_s > 0:
                allowed = (deadline - now) * HEADROOM
                finish_s = start_s + expected
                if finish_s > allowed:
                    self._refuse(
                        f"with the enrollments ahead of it this one would be done in about "
                        f"{finish_s:.0f} s, more than the {max(0.0, allowed):.0f} s its "
                        "deadline allows",
                        finish_s - allowed,
                    )
            ticket = EnrollTicket(self, renders=renders)
            if renders:
                self._waiting.append(ticket)
            else:
                self._drafts += 1
            return ticket

    def _refuse(self, why: str, wait_s: float) -> None:
        # The work ahead drains by a second every second: ``wait_s`` is when
        # the same request would be admitted (at least 1 s, whole seconds).
        retry = float(max(1, math.ceil(wait_s)))
        self.rejected += 1
        raise Overloaded(
            f"server is busy enrolling voices: {why}; retry in {retry:.0f} s",
            limit=self.queue,
            retry_after=retry,
        )

    def _expected_locked(self) -> float:
        return float(statistics.median(self._recent)) if self._recent else self._prior_s

    def _ahead_locked(self, now: float, expected: float) -> FirstAhead:
        """What a new enrollment waits for, in seconds, for the same list
        scheduling speech admission uses: the running ones' time left (a
        running one past its estimate counts as about to end) and the queued
        ones', FIFO."""
        running = [
            0.0 if _gone(ticket) else max(0.0, expected - (now - started))
            for ticket, started in self._running.items()
        ]
        return FirstAhead(running, [expected] * sum(not _gone(t) for t in self._waiting))

    def _wait_turn(self, ticket: EnrollTicket, cancelled: Callable[[], bool] | None) -> None:
        with self._cond:
            while not (
                self._waiting and self._waiting[0] is ticket and len(self._running) < self.slots
            ):
                if ticket.released or ticket not in self._waiting:
                    raise Cancelled("the enrollment gave up its place")
                if cancelled is not None and cancelled():
                    self._waiting.remove(ticket)
                    ticket.released = True
                    self._cond.notify_all()
                    raise Cancelled(
                        "the client went away while the enrollment waited; nothing was stored"
                    )
                self._cond.wait(TURN_POLL_S)
            self._waiting.popleft()
            self._running[ticket] = self._clock()

    def _release(self, ticket: EnrollTicket, completed: bool) -> None:
        with self._cond:
            if ticket.released:
                return
            ticket.released = True
            if ticket in self._running:
                started = self._running.pop(ticket)
                if completed:
                    self._recent.append(max(0.0, self._clock() - started))
            elif ticket in self._waiting:
                self._waiting.remove(ticket)
            elif not ticket.renders:
                self._drafts -= 1
            self._cond.notify_all()

    def stats(self) -> dict[str, float]:
        """Running, waiting and in-progress drafts now; the estimate; refusals so far."""
        with self._cond:
            return {
                "running": len(self._running),
                "waiting": len(self._waiting),
                "drafts": self._drafts,
                "expected_s": round(self._expected_locked(), 3),
                "rejected": self.rejected,
            }
