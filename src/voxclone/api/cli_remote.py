"""``voxclone say`` and ``voxclone clone`` through a running server: the models
are already warm there.

Loading the models in the CLI takes ~11 s a call; a local server answers the
same request in ~1.5 s. ``say`` therefore asks the server named by
``--server``, or by default the configured local one if its ``/readyz``
answers 200 within :data:`PROBE_TIMEOUT_S`, and speaks in-process otherwise.
Plain ``urllib``: the CLI needs no HTTP client package for this.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from voxclone.config import Settings
from voxclone.errors import VoxcloneError

PROBE_TIMEOUT_S = 0.2  # a local server answers /readyz in a few ms
REQUEST_TIMEOUT_S = 600.0
API_KEY_ENV = "VOXCLONE_API_KEY"


class RemoteError(VoxcloneError):
    """The server refused or failed the request; carries its status and message."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RemoteAudio:
    audio: bytes
    content_type: str


def add_server_options(parser: Any, verb: str) -> None:
    """``--server URL`` / ``--local`` for a command that can use a running server."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--server",
        metavar="URL",
        help=f"{verb} through this voxclone server (default: the configured local one, "
        "http://127.0.0.1:8000, if it is running; API key from VOXCLONE_API_KEY)",
    )
    where.add_argument(
        "--local", action="store_true", help="load the models in this process, never a server"
    )


def default_server_url(settings: Settings) -> str:
    """The configured local server (a wildcard bind is reached through loopback)."""
    host = settings.host
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    scheme = "https" if settings.ssl_certfile else "http"
    return f"{scheme}://{host}:{settings.port}"


def server_ready(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True if ``url`` is a voxclone server whose models are loaded."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/readyz", timeout=timeout_s) as response:
            return bool(response.status == 200 and json.load(response).get("status") == "ready")
    except (OSError, ValueError, urllib.error.URLError):
        return False


def speak_remote(url: str, body: dict[str, Any], api_key: str | None = None) -> RemoteAudio:
    """POST ``body`` to ``/v1/tts``; the whole audio file, or RemoteError."""
    payload = {k: v for k, v in body.items() if v is not None}
    request = _request(
        url,
        "/v1/tts",
        "POST",
        json.dumps({**payload, "stream": False}).encode(),
        "application/json",
        api_key,
    )
    with _opened(request, url) as response:
        return RemoteAudio(
            response.read(), response.headers.get("Content-Type", "application/octet-stream")
        )


def call_json(
    url: str,
    method: str,
    path: str,
    *,
    body: dict[str, Any] | None = None,
    form: Sequence[tuple[str, str]] = (),
    files: Sequence[tuple[str, str, bytes]] = (),
    api_key: str | None = None,
) -> dict[str, Any]:
    """One JSON API call: a JSON ``body``, or a multipart ``form`` with ``files``
    (field, file name, bytes); the decoded answer, or RemoteError."""
    data: bytes | None = None
    content_type = None
    if files or form:
        data, content_type = multipart(form, files)
    elif body is not None:
        data, content_type = json.dumps(body).encode(), "application/json"
    request = _request(url, path, method, data, content_type, api_key)
    with _opened(request, url) as response:
        answer: dict[str, Any] = json.load(response)
        return answer


def multipart(
    form: Sequence[tuple[str, str]], files: Sequence[tuple[str, str, bytes]]
) -> tuple[bytes, str]:
    """(body, content type) of a multipart/form-data upload."""
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        + value.encode()
        + b"\r\n"
        for name, value in form
    ]
    for name, filename, content in files:
        safe = filename.replace('"', "_").replace("\r", "_").replace("\n", "_")
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{safe}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        )
        parts.append(head.encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _request(
    url: str,
    path: str,
    method: str,
    data: bytes | None,
    content_type: str | None,
    api_key: str | None,
) -> urllib.request.Request:
    headers = {}
    if content_type is not None:
        headers["Content-Type"] = content_type
    key = api_key or os.environ.get(API_KEY_ENV)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return urllib.request.Request(
        f"{url.rstrip('/')}{path}", data=data, headers=headers, method=method
    )


@contextlib.contextmanager
def _opened(request: urllib.request.Request, url: str) -> Iterator[Any]:
    """``urlopen`` whose failures are RemoteErrors with the server's own message."""
    try:
        response = urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        raise RemoteError(_error_message(exc), exc.code) from None
    except (OSError, urllib.error.URLError) as exc:
        raise RemoteError(f"server {url} did not answer: {exc}", 503) from None
    with response:
        yield response


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        error = json.loads(exc.read().decode("utf-8", "replace")).get("error", {})
        return str(error.get("message") or exc.reason)
    except (ValueError, AttributeError):
        return f"server answered {exc.code} {exc.reason}"
