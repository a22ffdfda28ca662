"""A request's deadline: when it arrived, and an answer that comes by it or not at all.

Deadlines count from the request's arrival (:class:`ArrivalClockMiddleware`
stamps it before the body is read). :func:`by_deadline` awaits a worker
thread's result until the deadline and then gives up on it: the work is told
to stop through its cancel flag and left to end in its thread, and the
client gets 504 ``deadline_exceeded`` at the deadline instead of a 200 after
it (issue 45: whole files answered 200 after 36.8 s and 53.2 s against a
30 s deadline in a flood; only chunks still *queued* at the deadline were
dropped, while a chunk started just before it ran to its end, ~15 s for a
long one on 2 cores, and encoding came after).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from voxclone.errors import DeadlineExceeded

T = TypeVar("T")

# Where the request's arrival (time.monotonic()) is kept, in its scope state.
ARRIVED_STATE = "voxclone_arrived"


def arrived(scope: Any) -> float:
    """When the request arrived (now for a request the middleware did not see)."""
    return float(scope.get("state", {}).get(ARRIVED_STATE) or time.monotonic())


def deadline_exceeded(scope: Any, deadline: float) -> DeadlineExceeded:
    allowed = round(deadline - arrived(scope), 3)
    return DeadlineExceeded(
        f"the request was not served within its deadline of {allowed:g} s "
        "(request_deadline_s, or less by X-Request-Deadline); it was stopped: "
        "retry later or send less text",
        field="deadline",
        limit=allowed,
    )


async def by_deadline(
    scope: Any, work: Awaitable[T], deadline: float | None, stop: Callable[[], None]
) -> T:
    """``work``'s result if it comes by ``deadline`` (``time.monotonic()``); else
    call ``stop`` (the work's cancel flag) and raise DeadlineExceeded (504) at once.
    The work is also stopped when the caller is cancelled."""
    task = asyncio.ensure_future(work)
    try:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        stop()
        task.add_done_callback(_discard)
        raise
    if task in done:
        return task.result()
    assert deadline is not None  # a wait without a timeout ends only when done
    stop()
    # The thread ends on its own; its result or error is nobody's now.
    task.add_done_callback(_discard)
    raise deadline_exceeded(scope, deadline)


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
