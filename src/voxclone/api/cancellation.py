"""Whole-file requests that stop when their client leaves, and request deadlines.

A whole-file render runs in a worker thread while the route awaits it; the
route meanwhile polls the connection, and the moment the client disconnects
a flag the service polls turns true, so the render stops at its next chunk
(streams get the same through :mod:`voxclone.api.streaming`).

The deadline of a request is the setting ``request_deadline_s``, or less
when the client asks for less with ``X-Request-Deadline`` (or the draft
standard ``Request-Timeout``) in seconds, counted from the request's
arrival (``deadline.ArrivalClockMiddleware`` stamps it before the body is read,
so reading the body, an inline clone and the admission all count) on the
``time.monotonic()`` clock.

What a deadline promises: a whole file is complete by it. A stream delivers
its first audio within ``stream_first_audio_s`` (and by the deadline); when
the client named the deadline itself, the whole stream also ends by it, since
that client will hang up then. Without a header a stream may run past the
server's deadline: its client reads at its own pace and may be listening to a
long text.

A whole file is answered by its deadline: 504 at it, never a 200 after it;
a stream's first audio too, or 504 before any header (api/deadline.py).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from voxclone.api.deadline import arrived, by_deadline
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
    """Monotonic time by which this request must be served (header capped by ``limit_s``),
    counted from its arrival."""
    start = arrived(request.scope)
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
    return start + seconds


async def run_until_disconnect(
    request: Request,
    work: Callable[..., T],
    *args: Any,
    deadline: float | None = None,
    **kwargs: Any,
) -> T:
    """Run ``work(*args, cancelled=flag, **kwargs)`` in a worker thread; ``flag``
    turns true if the client leaves.

    Pass the service's method and its arguments rather than a closure of the
    route: the thread then calls down into the service, not back into the
    route that awaits it (the request walk's call-backs up, docs/architecture.md).

    With ``deadline`` (``time.monotonic()``) the answer comes by it: at the
    deadline ``flag`` turns true and DeadlineExceeded (504) is raised at once,
    while ``work`` stops in its thread at its next check (api/deadline.py).
    ``work`` is given the deadline too (``deadline=``) when there is one."""
    flag = CancelFlag()
    if deadline is not None:
        kwargs["deadline"] = deadline

    async def watch() -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(DISCONNECT_POLL_S)
        flag.set()

    watcher = asyncio.ensure_future(watch())
    try:
        thread = run_in_threadpool(work, *args, cancelled=flag, **kwargs)
        return await by_deadline(request.scope, thread, deadline, flag.set)
    finally:
        watcher.cancel()
