"""Slow request bodies are cut off: 408 once the body stalls or trickles.

A client sending its body at 1 byte/s held its connection and the buffers
of the body read forever (issue 45); uvicorn bounds the wait between
requests (keep-alive), not the wait for a body. Two rules, as Apache's
mod_reqtimeout ``body=...,MinRate=...``:

* idle: no byte of the body for ``idle_s`` seconds;
* rate: after the first ``idle_s`` seconds the body must keep averaging
  ``min_rate`` bytes a second (each ``min_rate`` bytes received buy one more
  second), so a trickle that never idles long enough is still cut off.

Either way the client gets 408 ``request_timeout`` naming ``body`` and the
idle limit, with ``Connection: close`` (the rest of its body is never read).
The clock runs only while the app waits for body bytes: once the body is
complete, ``receive`` is the server's own again (a route polling it for a
disconnect waits as long as it likes).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from fastapi.responses import JSONResponse

from voxclone.api.errors import error_body

log = logging.getLogger("voxclone.api")


class BodyReadTimeout(Exception):
    """The body stalled or trickled below the minimum rate.

    Not a VoxcloneError on purpose: FastAPI turns an error raised while it
    reads a body model into a 400, and the route's handlers would answer
    without ``Connection: close``; the middleware answers it instead."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BodyReadTimeoutMiddleware:
    """Answer 408 when a request body stalls for ``idle_s`` or trickles below ``min_rate``.

    ``idle_s`` <= 0 turns the guard off; ``min_rate`` <= 0 keeps only the idle rule.
    """

    def __init__(self, app: Any, *, idle_s: float, min_rate: float) -> None:
        self.app = app
        self.idle_s = idle_s
        self.min_rate = min_rate

    def _response(self, message: str) -> JSONResponse:
        return JSONResponse(
            error_body("request_timeout", message, field="body", limit=self.idle_s),
            status_code=408,
            headers={"Connection": "close"},
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.idle_s <= 0:
            await self.app(scope, receive, send)
            return
        arrived = time.monotonic()
        received = 0
        complete = False
        timed_out: BodyReadTimeout | None = None
        answered = False  # a response has started (the app's, or our 408)
        replaced = False  # the app's answer to the failed read became our 408

        async def timed_receive() -> Any:
            nonlocal received, complete, timed_out
            if complete or timed_out is not None:
                return await receive()
            now = time.monotonic()
            wait = self.idle_s
            if self.min_rate > 0:
                wait = min(wait, arrived + self.idle_s + received / self.min_rate - now)
            try:
                async with asyncio.timeout(max(0.0, wait)):
                    message = await receive()
            except TimeoutError:
                stalled = time.monotonic() - now >= self.idle_s
                rule = (
                    f"no byte of the request body arrived for {self.idle_s:g} s"
                    if stalled
                    else f"the request body arrived slower than {self.min_rate:g} bytes/s "
                    f"({received} bytes in {time.monotonic() - arrived:.1f} s)"
                )
                timed_out = BodyReadTimeout(f"{rule}; send the body without pauses")
                raise timed_out from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                complete = not message.get("more_body", False)
            else:
                complete = True  # disconnected: nothing more to time
            return message

        async def guarded_send(message: Any) -> None:
            nonlocal answered, replaced
            if timed_out is not None and not answered:
                # The app answered the failed read itself (FastAPI: 400 "error
                # parsing the body"): the client gets the 408 instead.
                answered = replaced = True
                await self._response(timed_out.message)(scope, receive, send)
                return
            if replaced:
                return  # the rest of the app's answer to the failed read
            if message["type"] == "http.response.start":
                answered = True
            await send(message)

        try:
            await self.app(scope, timed_receive, guarded_send)
        except BodyReadTimeout as exc:
            if answered:
                return
            answered = True
            log.info("request body timed out: %s", exc.message)
            await self._response(exc.message)(scope, receive, send)
