"""A request's reservation of engine time, held from admission to its end."""

from __future__ import annotations

from typing import TYPE_CHECKING

from voxclone.runtime.scheduler.work import PRIORITY_BACKGROUND

if TYPE_CHECKING:
    from voxclone.runtime.scheduler.fields import SchedulerFields


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
        "listener",
        "returns",
        "_scheduler",
        "__weakref__",
    )

    def __init__(
        self,
        scheduler: SchedulerFields,
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
        self.listener: str | None = None  # Work.listener of its chunks
        # Whether its listener comes back with another request when this one
        # ends (a voice agent's socket between clauses), or is done with it
        # (an HTTP or Wyoming stream).
        self.returns = True
        self._scheduler = scheduler

    def consume(self, chars: float) -> None:
        with self._scheduler._cond:
            self.remaining = max(0.0, self.remaining - chars)
            self.first_pending = 0.0

    def release(self) -> None:
        scheduler = self._scheduler
        with scheduler._cond:
            self.remaining = 0.0
            self.first_pending = 0.0
            scheduler._admissions.pop(self, None)
            if self.listener is not None and self.returns:
                now = scheduler._clock()
                left = scheduler._listeners_left
                left[self.listener] = now
                if len(left) > 64:  # forget the long gone
                    for name in [n for n, at in left.items() if now - at > 60.0]:
                        del left[name]


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
        self, scheduler: SchedulerFields, chars: float, window: float, tenant: str | None = None
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
