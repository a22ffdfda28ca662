"""Shared request dependencies: the runtime once ready, and the voice service."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from voxclone.bootstrap import Runtime
from voxclone.errors import NotReady

# How long a client should wait before retrying while models load.
NOT_READY_RETRY_S = 5.0


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    if runtime is None:
        raise NotReady(
            "the server is still loading models; retry shortly", retry_after=NOT_READY_RETRY_S
        )
    return runtime


def get_voice_service(request: Request) -> Any:
    """``runtime.voices`` (a VoiceService), attached by the composition root."""
    voices = getattr(get_runtime(request), "voices", None)
    if voices is None:
        raise NotReady("voice cloning is not available on this server")
    return voices


async def _runtime_dependency(request: Request) -> Runtime:
    # ``async`` on purpose: FastAPI runs a plain ``def`` dependency in the thread
    # pool, and under load that hop waited 10-20 ms per request for a worker thread
    # and the GIL (strace of a 40-client burst: refusals left one every ~15 ms, the
    # last after 560 ms). This needs no I/O, so it runs on the event loop.
    return get_runtime(request)


RuntimeDep = Annotated[Runtime, Depends(_runtime_dependency)]
