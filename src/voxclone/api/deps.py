"""What routes take from the app: the runtime once it is built, and its parts
that exist only by configuration, each refused with one typed error here.

The :class:`~voxclone.assembly.Runtime` is complete when a route sees it (the
composition root builds every part before it), so routes use ``runtime.jobs``,
``runtime.lexicon`` and the rest directly; only the optional parts come
through an accessor: ``require_voices`` turns a runtime without cloning into
503 ``not_ready``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request

from voxclone.assembly import Runtime
from voxclone.errors import NotReady

if TYPE_CHECKING:
    from voxclone.service.voices.service import VoiceService

# How long a client should wait before retrying while models load.
NOT_READY_RETRY_S = 5.0


def loaded_runtime(state: Any) -> Runtime | None:
    """The app's runtime (``request.app.state``), or None while the models load:
    for the routes that answer before that (/readyz, /metrics)."""
    runtime: Runtime | None = getattr(state, "runtime", None)
    return runtime


def get_runtime(request: Request) -> Runtime:
    """The runtime, or 503 ``not_ready`` (with Retry-After) while the models load."""
    runtime = loaded_runtime(request.app.state)
    if runtime is None:
        raise NotReady(
            "the server is still loading models; retry shortly", retry_after=NOT_READY_RETRY_S
        )
    return runtime


def require_voices(runtime: Runtime) -> VoiceService:
    """The voice (cloning) service, or 503 ``not_ready`` on a runtime built
    without cloning (``build_runtime(with_voices=False)``)."""
    if runtime.voices is None:
        raise NotReady("voice cloning is not available on this server")
    return runtime.voices


def get_voice_service(request: Request) -> VoiceService:
    """``require_voices`` of the request's runtime."""
    return require_voices(get_runtime(request))


async def _runtime_dependency(request: Request) -> Runtime:
    # ``async`` on purpose: FastAPI runs a plain ``def`` dependency in the thread
    # pool, and under load that hop waited 10-20 ms per request for a worker thread
    # and the GIL (strace of a 40-client burst: refusals left one every ~15 ms, the
    # last after 560 ms). This needs no I/O, so it runs on the event loop.
    return get_runtime(request)


RuntimeDep = Annotated[Runtime, Depends(_runtime_dependency)]
