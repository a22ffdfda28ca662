"""Whole-file requests that stop when their client leaves, and request deadlines.

A whole-file render runs in a worker thread while the route awaits it; the
route meanwhile polls the connection, and the moment the client disconnects
a flag the service polls turns true, so the render stops at its next chunk
(streams get the same through :mod:`voxclone.api.streaming`).

The deadline of a request is the setting ``request_deadline_s``, or less
when the client asks for less with ``X-Request-Deadline`` (or the draft
standard ``Request-Timeout``) in seconds. It is turned into a point on the
``time.monotonic()`` clock as soon as the request arrives.

What a deadline promises: a whole file is complete by it. A stream delivers
its first audio within ``stream_first_audio_s`` (and by the deadline); when
the client named the deadline itself, the whole stream also ends by it, since
that client will hang up then. Without a header a stream may run past the
server's deadline: its client reads at its own pace and may be listening to a
long text.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from voxclone.api.streaming import CancelFlag
from voxclone.errors import InvalidInput

T = TypeVar("T")

DEADLINE_HEADERS = ("x-request-deadline", "request-timeout")
# How often the route checks whether the client is still connected: the work
# a departed client can still cause is about one chunk plus this.
DISCONNECT_POLL_S = 0.05


def client_set_deadline(request: Request) -> bool:
    """Whether the client said when it gives up (then a stream must end by then too)."""
    return any(request.headers.get(name) is not None for name in DEADLINE_HEADERS)


def request_deadline(request: Request, limit_s: float) -> float:
    """Monotonic time by which this request must be served (header capped by ``limit_s``)."""
    arrived = time.monotonic()
    seconds = limit_s
    for name in DEADLINE_HEADERS:
        raw = request.headers.get(name)
        if raw is None:
            continue
        try:
            asked = float(raw.strip())
        except ValueError:
            asked = math.nan
        if not math.isfinite(asked) or asked <= 0:
            raise InvalidInput(
                f"{name} must be a positive number of seconds",
                field=name,
                limit=limit_s,
            )
        seconds = min(seconds, asked)
        break
    return arrived + seconds


async def run_until_disconnect(request: Request, work: Callable[[CancelFlag], T]) -> T:
    """Run ``work(flag)`` in a worker thread; ``flag`` turns true if the client leaves."""
    flag = CancelFlag()

    async def watch() -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(DISCONNECT_POLL_S)
        flag.set()

    watcher = asyncio.ensure_future(watch())
    try:
        return await run_in_threadpool(work, flag)
    finally:
        watcher.cancel()
