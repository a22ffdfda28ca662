"""Progress events for asyncio subscribers: :class:`JobEvents` lets asyncio
code await a job's progress while the work itself runs in worker threads."""

from __future__ import annotations

import asyncio
import builtins
import threading
from collections.abc import AsyncIterator
from typing import Self

from voxclone.runtime.job_store.records import JobRecord


class JobSubscription:
    """One subscriber's queue of updates for one job.

    Use as ``async with events.subscribe(job_id) as sub: async for job in sub``;
    iteration ends after a terminal state.
    """

    def __init__(
        self, events: JobEvents, job_id: str, loop: asyncio.AbstractEventLoop, max_queue: int
    ) -> None:
        self.job_id = job_id
        self.loop = loop
        self._events = events
        self._queue: asyncio.Queue[JobRecord] = asyncio.Queue(maxsize=max_queue)
        self._finished = False

    def offer(self, job: JobRecord) -> None:
        """Queue an update; must run on ``self.loop``."""
        if self._queue.full():
            # A slow reader only needs the newest progress; drop the oldest
            # update rather than block the worker or grow without bound.
            self._queue.get_nowait()
        self._queue.put_nowait(job)

    async def next(self, timeout: float | None = None) -> JobRecord:
        """The next update; raises TimeoutError after ``timeout`` seconds."""
        return await asyncio.wait_for(self._queue.get(), timeout)

    def __aiter__(self) -> AsyncIterator[JobRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[JobRecord]:
        while not self._finished:
            job = await self._queue.get()
            self._finished = job.done
            yield job

    def close(self) -> None:
        self._events.unsubscribe(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()


class JobEvents:
    """In-process pub/sub of job updates, one asyncio.Queue per subscriber.

    ``publish`` may be called from any thread: updates are handed to each
    subscriber's own event loop with ``call_soon_threadsafe``, because
    asyncio queues are not thread-safe.
    """

    def __init__(self, *, max_queue: int = 64) -> None:
        self._max_queue = max_queue
        self._subscribers: dict[str, builtins.list[JobSubscription]] = {}
        self._lock = threading.Lock()

    def subscribe(self, job_id: str, initial: JobRecord | None = None) -> JobSubscription:
        """Start receiving updates for ``job_id`` (call from a coroutine).

        Pass the job's current record as ``initial`` so a subscriber that
        arrives after the last update still sees the final state.
        """
        subscription = JobSubscription(self, job_id, asyncio.get_running_loop(), self._max_queue)
        with self._lock:
            self._subscribers.setdefault(job_id, []).append(subscription)
        if initial is not None:
            subscription.offer(initial)
        return subscription

    def unsubscribe(self, subscription: JobSubscription) -> None:
        with self._lock:
            subscribers = self._subscribers.get(subscription.job_id, [])
            if subscription in subscribers:
                subscribers.remove(subscription)
            if not subscribers:
                self._subscribers.pop(subscription.job_id, None)

    def subscriber_count(self, job_id: str) -> int:
        with self._lock:
            return len(self._subscribers.get(job_id, []))

    def publish(self, job: JobRecord) -> None:
        """Deliver ``job`` to every subscriber of ``job.id``; safe from any thread."""
        with self._lock:
            subscribers = builtins.list(self._subscribers.get(job.id, []))
        try:
            current_loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current_loop = None
        for subscription in subscribers:
            if subscription.loop is current_loop:
                subscription.offer(job)
                continue
            try:
                subscription.loop.call_soon_threadsafe(subscription.offer, job)
            except RuntimeError:
                # The subscriber's loop has closed: nobody is listening any more.
                self.unsubscribe(subscription)
