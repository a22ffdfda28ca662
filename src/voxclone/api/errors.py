"""Exception handlers: every error leaves the API as one JSON shape.

``{"error": {"code", "message", "field"?, "limit"?}}`` — for typed service
errors, request validation, unknown routes and methods, oversized bodies and
unexpected failures alike. Unexpected failures are logged with their
traceback server-side; the client gets only a request id to quote.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from voxclone.errors import VoxcloneError
from voxclone.runtime.outage import outage_error

log = logging.getLogger("voxclone.api")

# Statuses whose clients are told when to come back.
_RETRY_STATUSES = frozenset({429, 503})
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media",
}
# Pieces of a pydantic error location that are not the client's field name.
_LOCATION_ROOTS = frozenset({"body", "query", "path", "header", "form", "cookie"})


def error_body(
    code: str, message: str, *, field: str | None = None, limit: Any = None
) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        err["field"] = field
    if limit is not None:
        err["limit"] = limit
    return {"error": err}


def retry_after_header(seconds: float | None) -> dict[str, str]:
    """Retry-After takes whole seconds; round up so clients never come back early."""
    return {"Retry-After": str(max(1, math.ceil(seconds or 1.0)))}


def voxclone_error_response(exc: VoxcloneError) -> JSONResponse:
    headers: dict[str, str] = {}
    if exc.status in _RETRY_STATUSES or exc.retry_after is not None:
        headers.update(retry_after_header(exc.retry_after))
    return JSONResponse(exc.to_body(), status_code=exc.status, headers=headers)


def internal_error_response(request_id: str | None) -> JSONResponse:
    message = "internal server error"
    if request_id:
        message += f"; quote request id {request_id} when reporting it"
    return JSONResponse(error_body("internal_error", message), status_code=500)


def unexpected_error_response(exc: BaseException, request_id: str | None) -> JSONResponse:
    """An exception no handler expected, logged: an outage of the database or the
    disk (runtime/outage.py) answers 503 + Retry-After or 507, anything else 500."""
    fault = outage_error(exc)
    if fault is None:
        log.error("unhandled error (request id %s)", request_id, exc_info=exc)
        return internal_error_response(request_id)
    # Expected while it lasts: one line per request, not a traceback. The
    # driver's first line only: SQLAlchemy's text adds the statement and its
    # parameters (key hashes, embeddings).
    cause = (str(getattr(exc, "orig", None) or exc).splitlines() or [""])[0]
    log.warning("request failed: %s (%s: %s)", fault.code, type(exc).__name__, cause)
    return voxclone_error_response(fault)


def _field_of(loc: tuple[Any, ...] | list[Any]) -> str | None:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p in _LOCATION_ROOTS)]
    return ".".join(parts) if parts else None


async def _on_voxclone_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, VoxcloneError)
    if exc.status == 500:
        # A generic failure raised from an outage says what it is: 503 or 507.
        exc = outage_error(exc) or exc
    if exc.status >= 500:
        log.warning("request failed: %s (%s)", exc.code, exc.message)
    return voxclone_error_response(exc)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {}
    field = _field_of(first.get("loc", ()))
    detail = str(first.get("msg", "invalid request"))
    message = f"{field}: {detail}" if field else detail
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem(s))"
    return JSONResponse(error_body("invalid_input", message, field=field), status_code=422)


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    if exc.status_code == 404:
        message = f"no such endpoint or file: {request.url.path[:200]}"
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path[:200]}"
    else:
        message = str(exc.detail) if exc.detail else code.replace("_", " ")
    return JSONResponse(error_body(code, message), status_code=exc.status_code, headers=exc.headers)


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    return unexpected_error_response(exc, getattr(request.state, "request_id", None))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(VoxcloneError, _on_voxclone_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_unexpected)


class BodySizeLimitMiddleware:
    """Refuse request bodies above ``max_bytes`` while they arrive (413).

    A declared Content-Length above the limit is refused before reading a
    byte; a chunked body is counted as it streams and cut off at the limit,
    so an oversized upload never sits in memory or on disk in full.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> JSONResponse:
        limit_mb = round(self.max_bytes / (1 << 20), 2)
        return JSONResponse(
            error_body(
                "payload_too_large",
                f"request body is larger than the {limit_mb:g} MB limit",
                limit=self.max_bytes,
            ),
            status_code=413,
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._too_large()(scope, receive, send)
                    return
        received = 0
        exceeded = False
        started = False

        async def counting_receive() -> Any:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    exceeded = True
                    raise _BodyTooLarge()
            return message

        async def guarded_send(message: Any) -> None:
            nonlocal started
            if exceeded and not started:
                # Whatever the app made of the interrupted body (often a 400
                # from the form parser), the client's problem is the size.
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not exceeded or started:
                raise
        if exceeded and not started:
            await self._too_large()(scope, receive, send)


class _BodyTooLarge(Exception):
    """Raised inside ``receive`` to stop the app reading an oversized body."""
