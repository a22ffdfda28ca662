"""Whole-file requests that stop when their client leaves, and request deadlines.

A whole-file render runs in a worker thread while the route awaits it; the
route meanwhile polls the connection, and the moment the client disconnects
a flag the service polls turns true, so the render stops at its next chunk
(streams get the same through :mod:`voxclone.api.streaming`).

The deadline of a request is the setting ``request_deadline_s``, or less
when the client asks for less with ``X-Request-Deadline`` (or the draft
standard ``Request-Timeout``) in seconds, counted from the request's
arrival (:class:`ArrivalClockMiddleware` stamps it before the body is read,
so reading the body, an inline clone and the admission all count) on the
``time.monotonic()`` clock.

What a deadline promises: a whole file is complete by it. A stream delivers
its first audio within ``stream_first_audio_s`` (and by the deadline); when
the client named the deadline itself, the whole stream also ends by it, since
that client will hang up then. Without a header a stream may run past the
server's deadline: its client reads at its own pace and may be listening to a
long text.

A whole file is answered by its deadline: 504 ``deadline_exceeded`` at the
deadline, never a 200 after it (issue 45: 36.8 s and 53.2 s against 30 s in
a flood, because only chunks still *queued* at the deadline were dropped:
a chunk started just before it ran to its end, up to ~15 s for a long one on
2 cores, and encoding came after). The render is told to stop (its
``cancelled`` flag) and left to end at its next chunk in its thread.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from voxclone.api.streaming import CancelFlag
from voxclone.errors import DeadlineExceeded, InvalidInput

T = TypeVar("T")

DEADLINE_HEADERS = ("x-request-deadline", "request-timeout")
# Where the request's arrival (time.monotonic()) is kept, in its scope state.
ARRIVED_STATE = "voxclone_arrived"
# How often the route checks whether the client is still connected: the work
# a departed client can still cause is about one chunk plus this.
DISCONNECT_POLL_S = 0.05


def client_set_deadline(request: Request) -> bool:
    """Whether the client said when it gives up (then a stream must end by then too)."""
    return any(request.headers.get(name) is not None for name in DEADLINE_HEADERS)


def request_deadline(request: Request, limit_s: float) -> float:
    """Monotonic time by which this request must be served (header capped by ``limit_s``),
    counted from its arrival."""
    arrived = request.scope.get("state", {}).get(ARRIVED_STATE) or time.monotonic()
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


async def run_until_disconnect(
    request: Request, work: Callable[[CancelFlag], T], *, deadline: float | None = None
) -> T:
    """Run ``work(flag)`` in a worker thread; ``flag`` turns true if the client leaves.

    With ``deadline`` (``time.monotonic()``) the answer comes by it: at the
    deadline ``flag`` turns true and DeadlineExceeded (504) is raised at once,
    while ``work`` stops in its thread at its next check."""
    flag = CancelFlag()

    async def watch() -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(DISCONNECT_POLL_S)
        flag.set()

    watcher = asyncio.ensure_future(watch())
    task = asyncio.ensure_future(run_in_threadpool(work, flag))
    try:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if task in done:
            return task.result()
        flag.set()
        # The thread ends on its own; its result or error is nobody's now.
        task.add_done_callback(_discard)
        assert deadline is not None  # a wait without a timeout only ends when done
        allowed = round(deadline - _arrived(request), 3)
        raise DeadlineExceeded(
            f"the request was not served within its deadline of {allowed:g} s "
            "(request_deadline_s, or less by X-Request-Deadline); it was stopped: "
            "retry later or send less text",
            field="deadline",
            limit=allowed,
        )
    except asyncio.CancelledError:
        flag.set()
        task.add_done_callback(_discard)
        raise
    finally:
        watcher.cancel()


def _arrived(request: Request) -> float:
    return float(request.scope.get("state", {}).get(ARRIVED_STATE) or time.monotonic())


def _discard(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved" warning


class ArrivalClockMiddleware:
    """Stamp each request's arrival, which its deadline counts from."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope.setdefault("state", {})[ARRIVED_STATE] = time.monotonic()
        await self.app(scope, receive, send)
