"""Streaming responses that stop synthesis when the client goes away.

The service's stream is a synchronous iterator. It is advanced in a worker
thread, one chunk at a time; when the client disconnects a flag the service
polls turns true at once (so queued engine work is dropped), and the
iterator is closed so its ``finally`` cancels whatever was still in flight.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from voxclone.api.deadline import by_deadline
from voxclone.errors import Cancelled, Overloaded, VoxcloneError

log = logging.getLogger("voxclone.api")


class StreamSlots:
    """Counts open audio streams and refuses more than ``limit`` (503 + Retry-After)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open = 0
        self._lock = threading.Lock()

    @property
    def open(self) -> int:
        with self._lock:
            return self._open

    def acquire(self) -> Callable[[], None]:
        """Take a slot; returns an idempotent release function."""
        with self._lock:
            if self._open >= self.limit:
                raise Overloaded(
                    f"too many concurrent streams (limit {self.limit}); retry shortly",
                    limit=self.limit,
                    retry_after=1.0,
                )
            self._open += 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if not released:
                    released = True
                    self._open -= 1

        return release


class CancelFlag:
    """Becomes true when the client disconnects; passed to the service as ``cancelled``."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def __call__(self) -> bool:
        return self._event.is_set()


class CancellableStreamingResponse(StreamingResponse):
    """A StreamingResponse that raises ``flag`` the moment the client disconnects."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        flag: CancelFlag,
        on_close: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(content, **kwargs)
        self._flag = flag
        self._on_close = on_close

    async def listen_for_disconnect(self, receive: Receive) -> None:
        await super().listen_for_disconnect(receive)
        self._flag.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._flag.set()  # the stream is over either way; stop any leftover work
            if self._on_close is not None:
                self._on_close()


async def threaded_chunks(
    chunks: Iterator[bytes],
    flag: CancelFlag,
    *,
    on_first_audio: Callable[[float], None] | None = None,
    started: float | None = None,
) -> AsyncIterator[bytes]:
    """Yield ``chunks`` advanced in a worker thread; close them however the stream ends.

    ``on_first_audio`` receives the seconds from ``started`` to the first
    chunk after the container header (the first one that carries audio).
    """
    t0 = started if started is not None else time.perf_counter()
    index = 0
    try:
        async for chunk in iterate_in_threadpool(chunks):
            if index == 1 and on_first_audio is not None:
                on_first_audio(time.perf_counter() - t0)
            index += 1
            yield chunk
    except Cancelled:
        return
    except VoxcloneError as exc:
        # Headers are already sent, so the status cannot change any more; the
        # client sees the stream end early and the reason is in our log.
        log.warning("stream ended early: %s (%s)", exc.code, exc.message)
        raise
    finally:
        flag.set()
        # Synchronous on purpose: an await here would be cancelled again when
        # the client is gone. The thread running ``next`` has finished by now
        # (threads are not abandoned on cancel), and closing only runs the
        # service's ``finally`` blocks, which cancel queued work.
        close = getattr(chunks, "close", None)
        if close is not None:
            try:
                close()
            except ValueError:
                log.debug("stream iterator still running; it stops at its next chunk")


@dataclass(frozen=True)
class AudioStream:
    """A started synthesis stream holding a stream slot until its response closes."""

    content_type: str
    chunks: Iterator[bytes]  # the service's own iterator, as it returned it
    audio: AsyncIterator[bytes]  # ``chunks`` advanced in a worker thread
    flag: CancelFlag
    release: Callable[[], None]

    def response(self, content: AsyncIterator[bytes], **kwargs: Any) -> StreamingResponse:
        """Send ``content`` (``audio`` or a wrapper around it); frees the slot when done."""
        return CancellableStreamingResponse(
            content, flag=self.flag, on_close=self.release, **kwargs
        )


async def open_audio_stream(
    request: Request,
    start: Callable[..., tuple[str, Iterator[bytes]]],
    *args: Any,
    started: float | None = None,
    deadline: float | None = None,
    first_audio_index: int = 1,
    **kwargs: Any,
) -> AudioStream:
    """Take a stream slot and call ``start(*args, cancelled=flag, **kwargs)`` (the
    service's ``stream`` and its arguments, not a closure of the route: the thread
    calls down, not back into the route) off the loop; with ``deadline``, ``start``
    is given it too (``deadline=``).

    Starting runs in a thread because it validates and may load a voice; an
    error there (a 4xx) frees the slot again, since no response will. The
    time to first audio is observed from ``started`` (default: when the
    first chunk is asked for).

    With ``deadline`` (``time.monotonic()``) the stream's chunks up to its
    first audio (index ``first_audio_index``: 1 after a container header, 0
    for events that each carry audio) are made before any header is sent, by
    the deadline: a stream that cannot start in time is a 504 (a failure
    before its first audio a 4xx/5xx), not a 200 whose body ends early.
    """
    release = request.app.state.stream_slots.acquire()
    flag = CancelFlag()
    if deadline is not None:
        kwargs["deadline"] = deadline

    def begin() -> tuple[str, Iterator[bytes], list[bytes]]:
        content_type, chunks = start(*args, cancelled=flag, **kwargs)
        head: list[bytes] = []
        if deadline is not None:
            for chunk in chunks:  # not closed by the break: the rest follows
                head.append(chunk)
                if len(head) > first_audio_index:
                    break
        return content_type, chunks, head

    try:
        content_type, chunks, head = await by_deadline(
            request.scope, run_in_threadpool(begin), deadline, flag.set
        )
    except BaseException:
        release()
        raise
    metrics = request.app.state.metrics
    source = _replayed(head, chunks) if deadline is not None else chunks

    def close() -> None:
        # A response that ends before its body was ever iterated (the client
        # left at once) never runs threaded_chunks' ``finally``: close the
        # render here, or its admission stays reserved until the generator is
        # collected (found when the request after test_admission_http's
        # left-at-once stream was refused 503 with ~26 s of work admitted).
        release()
        close_source = getattr(source, "close", None)
        if close_source is not None:
            try:
                close_source()
            except ValueError:
                log.debug("stream iterator still running; it stops at its next chunk")

    audio = threaded_chunks(
        source, flag, on_first_audio=metrics.time_to_first_audio.observe, started=started
    )
    return AudioStream(content_type, chunks, audio, flag, close)


def _replayed(head: list[bytes], chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``head`` (taken from ``chunks`` already), then the rest of ``chunks``;
    closing it closes ``chunks`` (its ``finally`` frees queued work)."""
    try:
        yield from head
        yield from chunks
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
