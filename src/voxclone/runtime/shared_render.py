"""Identical concurrent renders share one: the first caller leads, the others follow.

Two shapes, one rule: the shared render stops only once every caller has
gone (:func:`_all_gone`), so one impatient client cannot cut off the audio
others are still waiting for or listening to.

Whole files (:class:`SingleFlight`). When many clients ask for the same
uncached audio at once, only the first caller synthesizes it; the others wait
for that result (or its exception). The entry is forgotten as soon as the
computation ends, so a later call computes afresh (normally finding the
result in the cache by then). ``do_cancellable`` lets each waiting thread say
when its client has gone. Threads and asyncio tasks are tracked separately: a
thread call and a task call with the same key do not share one computation.

Streams (:class:`StreamShares`). A stream cannot wait for a whole result, so
:class:`SharedStream` keeps the parts one render has produced and lets every
reader walk them at its own pace. There is no producer thread: whichever
reader needs a part nobody has made yet pulls it from the render (one at a
time), so a lone stream behaves exactly as before (paced by its client), and
a second identical request that arrives while the first is being spoken gets
every part from the beginning and then follows the same render instead of
queueing its own. The render stops (its generator is closed, which cancels
its queued chunks and frees its admission) only when every reader has gone;
:meth:`SharedStream.abandoned` tells the render the same, for the
cancellation checks between its chunks. :class:`StreamShares` maps a key (the
cache key: same text, voice, version, controls, format) to the stream now in
flight; a stream leaves it once its render has ended, after which identical
requests find the cache.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from voxclone.errors import Cancelled

T = TypeVar("T")

# How often a waiting follower (a thread waiting for a file, a reader for the
# next part) checks whether its own client has gone.
_WAIT_POLL_S = 0.05
_GONE = object()


def _all_gone(flags: Iterable[Callable[[], bool] | None]) -> bool:
    """True once every caller's client has gone (a caller without a flag
    never goes; no caller at all: gone)."""
    return all(flag is not None and flag() for flag in flags)


# -- whole files ------------------------------------------------------------------


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
        return _all_gone(flags)


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


# -- streams ----------------------------------------------------------------------


class SharedStream:
    """The parts of one render, readable by several clients at once."""

    def __init__(self, on_end: Callable[[SharedStream], None] | None = None) -> None:
        self._source: Iterator[bytes] | None = None
        self._parts: list[bytes] = []
        self._done = False
        self._error: BaseException | None = None
        self._closed = False  # every reader left before the end: no one may join
        self._pulling = False
        self._readers: dict[int, Callable[[], bool] | None] = {}
        self._next_reader = 0
        self._cond = threading.Condition()
        self._on_end = on_end

    def start(self, source: Iterator[bytes]) -> None:
        """The render to share (set once, before the first reader reads)."""
        self._source = source

    def abandoned(self) -> bool:
        """True once no reader is left, or every reader's client has gone."""
        with self._cond:
            flags = list(self._readers.values())
        return _all_gone(flags)

    def join(self, cancelled: Callable[[], bool] | None = None) -> Iterator[bytes] | None:
        """A reader from the first part on, or None when the render already
        stopped without its end (every reader left): render afresh then."""
        with self._cond:
            if self._closed or self._error is not None:
                return None
            reader = self._next_reader
            self._next_reader += 1
            self._readers[reader] = cancelled
        steps = self._read(reader, cancelled)
        # A reader dropped before its first step never runs its ``finally``:
        # it must still leave, or the render would wait for it forever.
        weakref.finalize(steps, self._leave, reader)
        return steps

    def _read(self, reader: int, cancelled: Callable[[], bool] | None) -> Iterator[bytes]:
        index = 0
        try:
            while True:
                part = self._next_part(index, cancelled)
                if part is None:
                    return
                index += 1
                yield part
        finally:
            self._leave(reader)

    def _next_part(self, index: int, cancelled: Callable[[], bool] | None) -> bytes | None:
        with self._cond:
            while True:
                if index < len(self._parts):
                    return self._parts[index]
                if self._error is not None:
                    raise self._error
                if self._done:
                    return None
                if not self._pulling:
                    self._pulling = True
                    break
                self._cond.wait(_WAIT_POLL_S)
                if cancelled is not None and cancelled():
                    raise Cancelled("request cancelled")
        return self._pull(index)

    def _pull(self, index: int) -> bytes | None:
        """Take the next part from the render (this reader is the only puller)."""
        assert self._source is not None, "SharedStream.start was not called"
        part: bytes | None = None
        error: BaseException | None = None
        try:
            part = next(self._source)
        except StopIteration:
            pass
        except BaseException as exc:  # the render failed: every reader gets it
            error = exc
        with self._cond:
            self._pulling = False
            if error is not None:
                self._error = error
            elif part is None:
                self._done = True
            else:
                self._parts.append(part)
            self._cond.notify_all()
            ended = self._done or self._error is not None
        if ended:
            self._ended()
        if error is not None:
            raise error
        return part if part is not None else self._after_end(index)

    def _after_end(self, index: int) -> bytes | None:
        with self._cond:
            return self._parts[index] if index < len(self._parts) else None

    def _leave(self, reader: int) -> None:
        with self._cond:
            if self._readers.pop(reader, _GONE) is _GONE:
                return  # left already (its finally, then its finalizer)
            last = not self._readers and not self._done and self._error is None
            if last:
                self._closed = True
        if last:
            # No reader is pulling (a reader pulls only inside its own step),
            # so the render can be closed here: its queued chunks are dropped.
            self._ended()
            close = getattr(self._source, "close", None)
            if close is not None:
                close()

    def _ended(self) -> None:
        if self._on_end is not None:
            on_end, self._on_end = self._on_end, None
            on_end(self)


class StreamShares:
    """The streams in flight, by key; a stream leaves when its render ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[Hashable, SharedStream] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._streams)

    def follow(
        self, key: Hashable, cancelled: Callable[[], bool] | None = None
    ) -> Iterator[bytes] | None:
        """A reader of the identical stream in flight, or None if there is none."""
        with self._lock:
            shared = self._streams.get(key)
        return None if shared is None else shared.join(cancelled)

    def lead(
        self,
        key: Hashable,
        render: Callable[[SharedStream], Iterator[bytes]],
        cancelled: Callable[[], bool] | None = None,
    ) -> tuple[Iterator[bytes], bool]:
        """Start ``render`` (given the shared stream, for its ``abandoned``
        check; it must only build its generator, not run it) as the stream
        for ``key``. Returns the caller's reader and whether it leads: an
        identical stream that started meanwhile is followed instead, and
        ``render`` is not called."""

        def forget(stream: SharedStream) -> None:
            with self._lock:
                if self._streams.get(key) is stream:
                    del self._streams[key]

        with self._lock:
            current = self._streams.get(key)
            reader = None if current is None else current.join(cancelled)
            if reader is not None:
                return reader, False
            shared = SharedStream(on_end=forget)
            shared.start(render(shared))
            self._streams[key] = shared
            own = shared.join(cancelled)
        assert own is not None  # nobody could have closed a stream with no reader yet
        return own, True
