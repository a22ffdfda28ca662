"""Collapse concurrent identical work into one computation.

When many clients ask for the same uncached audio at once, only the first
caller synthesizes it; the others wait for that result (or its exception).
The entry is forgotten as soon as the computation ends, so a later call
computes afresh (normally finding the result in the cache by then).

``do_cancellable`` lets each waiting thread say when its client has gone:
the shared computation is told to stop only once every waiter has left, so
one impatient client cannot cancel the audio others are still waiting for.

Threads and asyncio tasks are tracked separately: a thread call and a task
call with the same key do not share one computation.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _ThreadCall(Generic[T]):
    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: T | None = None
        self.error: BaseException | None = None


class _SharedCall(_ThreadCall[T]):
    __slots__ = ("flags", "lock")

    def __init__(self) -> None:
        super().__init__()
        self.flags: list[Callable[[], bool] | None] = []
        self.lock = threading.Lock()

    def join(self, cancelled: Callable[[], bool] | None) -> None:
        with self.lock:
            self.flags.append(cancelled)

    def abandoned(self) -> bool:
        """True once every waiter's client has gone (a waiter without a flag never goes)."""
        with self.lock:
            flags = list(self.flags)
        return all(flag is not None and flag() for flag in flags)


# How often a waiting thread checks whether its own client has gone.
_WAIT_POLL_S = 0.05


def _consume_outcome(task: asyncio.Future[Any]) -> None:
    # If every waiter was cancelled, nobody awaits the task; reading its
    # exception here keeps asyncio from logging "exception never retrieved".
    if not task.cancelled():
        task.exception()


class SingleFlight:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread_calls: dict[Hashable, _ThreadCall[Any]] = {}
        # Keyed by (event loop, key): a task can only be awaited on its own loop.
        self._async_calls: dict[tuple[int, Hashable], asyncio.Future[Any]] = {}

    def in_flight(self) -> int:
        with self._lock:
            return len(self._thread_calls) + len(self._async_calls)

    def do(self, key: Hashable, fn: Callable[[], T]) -> T:
        """Run ``fn`` once for all threads that call with ``key`` concurrently."""
        with self._lock:
            call = self._thread_calls.get(key)
            leader = call is None
            if call is None:
                call = _ThreadCall()
                self._thread_calls[key] = call
        if not leader:
            call.done.wait()
        else:
            try:
                call.result = fn()
            except BaseException as exc:
                call.error = exc
            finally:
                with self._lock:
                    del self._thread_calls[key]
                call.done.set()
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]

    def do_cancellable(
        self,
        key: Hashable,
        fn: Callable[[Callable[[], bool]], T],
        cancelled: Callable[[], bool] | None = None,
    ) -> T:
        """Like :meth:`do`, for work that can stop early.

        ``fn`` receives an ``abandoned()`` callable that turns true only when
        every waiter's ``cancelled`` is true; it should poll it and stop. A
        waiter whose own ``cancelled`` turns true stops waiting at once and
        gets :class:`~voxclone.errors.Cancelled`.
        """
        from voxclone.errors import Cancelled

        while True:
            with self._lock:
                found = self._thread_calls.get(("cancellable", key))
                leader = found is None
                call: _SharedCall[T] = found if found is not None else _SharedCall()  # type: ignore[assignment]
                call.join(cancelled)
                if leader:
                    self._thread_calls[("cancellable", key)] = call
            if leader:
                try:
                    call.result = fn(call.abandoned)
                except BaseException as exc:
                    call.error = exc
                finally:
                    with self._lock:
                        del self._thread_calls[("cancellable", key)]
                    call.done.set()
            else:
                while not call.done.wait(_WAIT_POLL_S):
                    if cancelled is not None and cancelled():
                        raise Cancelled("request cancelled")
            if isinstance(call.error, Cancelled) and not (cancelled is not None and cancelled()):
                # The shared work stopped because everyone else left just as
                # this waiter joined: start it again rather than fail a live client.
                continue
            if call.error is not None:
                raise call.error
            return call.result  # type: ignore[return-value]

    async def do_async(self, key: Hashable, coro_fn: Callable[[], Awaitable[T]]) -> T:
        """Await ``coro_fn()`` once for all tasks that call with ``key`` concurrently.

        The work runs in its own task, so cancelling one waiter (a client that
        went away) neither cancels the work nor the other waiters.
        """
        loop = asyncio.get_running_loop()
        slot = (id(loop), key)
        with self._lock:
            task = self._async_calls.get(slot)
            if task is None:
                task = asyncio.ensure_future(coro_fn())
                self._async_calls[slot] = task
                task.add_done_callback(lambda _t: self._forget_async(slot))
                task.add_done_callback(_consume_outcome)
        result: T = await asyncio.shield(task)
        return result

    def _forget_async(self, slot: tuple[int, Hashable]) -> None:
        with self._lock:
            self._async_calls.pop(slot, None)
