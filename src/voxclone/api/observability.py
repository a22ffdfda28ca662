"""Request ids, JSON access logs and Prometheus request metrics.

The access log records method, route template, status, latency and request
id. It never records the text to speak, headers carrying keys, or audio.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voxclone.api.errors import unexpected_error_response
from voxclone.runtime.metrics import Metrics

REQUEST_ID_HEADER = "X-Request-ID"
# A client-supplied id is echoed into logs and headers, so only a short,
# plain token is accepted; anything else is replaced by a fresh id.
_REQUEST_ID_PATTERN = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "voxclone_request_id", default=None
)
access_log = logging.getLogger("voxclone.access")
log = logging.getLogger("voxclone.api")


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the current request id when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        else:
            entry["message"] = record.getMessage()
        request_id = entry.get("request_id") or request_id_var.get()
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class HumanFormatter(logging.Formatter):
    """``12:03:04 INFO  voxclone.api: message  key=value …``: for a person at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            fields = dict(fields)
            message = str(fields.pop("event", record.getMessage()))
            if message == "request":
                # The access log as a person reads it: "GET /v1/tts 200 812.0 ms".
                message = (
                    f"{fields.pop('method', '')} {fields.pop('route', '')} "
                    f"{fields.pop('status', '')} {fields.pop('latency_ms', '')} ms"
                )
            extra = "  ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
            message = f"{message}  {extra}" if extra else message
        else:
            message = record.getMessage()
        line = f"{stamp} {record.levelname:<7s} {record.name}: {message}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


LOG_FORMATS = ("auto", "json", "text")


def configure_logging(
    log_format: str = "auto", level: int = logging.INFO, stream: Any = None
) -> str:
    """Send logs to stderr as JSON lines, or as plain text; returns the format used.

    ``auto`` picks text when stderr is a terminal (a person is watching) and
    JSON otherwise (a log collector is).
    """
    import sys

    target = stream if stream is not None else sys.stderr
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}")
    chosen = log_format
    if chosen == "auto":
        chosen = "text" if getattr(target, "isatty", lambda: False)() else "json"
    handler = logging.StreamHandler(target)
    handler.setFormatter(HumanFormatter() if chosen == "text" else JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    return chosen


def configure_json_logging(level: int = logging.INFO) -> None:
    configure_logging("json", level)


def _incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            candidate = value.decode("latin-1").strip()
            return candidate if _REQUEST_ID_PATTERN.match(candidate) else None
    return None


def route_label(scope: Scope) -> str:
    """The route template (``/v1/voices/{voice_id}``), never the raw path: bounded label set."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str) and path not in ("", "/"):
        return path
    if route is not None:
        return "static"
    return "unmatched"


class RequestContextMiddleware:
    """Outermost middleware: request id, access log, request metrics, last-resort 500."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming_request_id(scope) or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            if response_started:
                log.exception("unhandled error (request id %s)", request_id)
                raise  # headers are out; the server aborts the connection
            # Logged there; a database or disk outage answers 503/507, not 500.
            response = unexpected_error_response(exc, request_id)
            status = response.status_code
            await response(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = route_label(scope)
            self.metrics.observe_request(route, scope.get("method", ""), status, elapsed)
            access_log.info(
                "request",
                extra={
                    "fields": {
                        "event": "request",
                        "request_id": request_id,
                        "method": scope.get("method"),
                        "route": route,
                        "status": status,
                        "latency_ms": round(elapsed * 1000, 1),
                        "owner": scope.get("state", {}).get("owner"),
                    }
                },
            )
            request_id_var.reset(token)
