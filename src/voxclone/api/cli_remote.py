"""``voxclone say`` and ``voxclone clone`` through a running server: the models
are already warm there.

Loading the models in the CLI takes ~11 s a call; a local server answers the
same request in ~1.5 s. ``say`` therefore asks the server named by
``--server``, or by default the configured local one if its ``/readyz``
answers 200 within :data:`PROBE_TIMEOUT_S`, and speaks in-process otherwise.
A local server found that way must serve the library of the command's
``VOXCLONE_HOME`` (its ``/readyz`` names it): otherwise the command stops with
one line naming both homes, ``--server`` and ``--local`` (issue 46).
Plain ``urllib``: the CLI needs no HTTP client package for this.

The server rate-limits anonymous callers per address (120 requests a minute,
bursts of 30, by default): every call here honours a 429's Retry-After and
tries again instead of failing the command (:func:`retrying`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from voxclone.config import Settings
from voxclone.errors import VoxcloneError
from voxclone.runtime.library_id import LIBRARY_HEADER, read_library_id

# How long the CLI waits for /readyz before speaking in-process. Where no
# server listens the connection is refused at once, so this bound is paid only
# when a server exists but is slow: an idle one answers in a few ms, but a busy
# 2-core host missed 0.2 s (the README walk, load ~11) and the CLI then loaded
# the models itself for 8-16 s. Waiting up to 2 s for a server is always cheaper.
PROBE_TIMEOUT_S = 2.0
# What loading the models in the CLI costs a command on a loaded 2-core
# machine (issue 38: 8-16 s per `say`, 16-31 s per `clone`, which also loads
# the cloning models); a server pays it once.
SAY_LOAD = "~8-16 s"
CLONE_LOAD = "~16-31 s"
REQUEST_TIMEOUT_S = 600.0
API_KEY_ENV = "VOXCLONE_API_KEY"
# How long one call keeps retrying while the server answers 429 (rate limited);
# the server names the wait in Retry-After (whole seconds, ~1 s at the default
# limit), so this is dozens of tries, not a hang. Waiting for a job has no such
# limit (cli_jobs.py): a 429 there only slows the polling.
RATE_LIMIT_PATIENCE_S = 120.0
RETRY_AFTER_MAX_S = 30.0  # a longer Retry-After is waited in steps of this

T = TypeVar("T")


class RemoteError(VoxcloneError):
    """The server refused or failed the request; carries its status and message
    (and, for 429/503, the seconds its Retry-After header asked for)."""

    def __init__(
        self,
        message: str,
        status: int,
        retry_after: float | None = None,
        field: str | None = None,
        limit: Any = None,
    ) -> None:
        super().__init__(message, field=field, limit=limit, retry_after=retry_after)
        self.status = status


class ServerUnreachable(RemoteError):
    """Nothing answered at the server's URL (refused, unknown host, timed out)."""


def retrying(call: Callable[[], T], *, patience_s: float | None = RATE_LIMIT_PATIENCE_S) -> T:
    """``call()``, again after each 429 (rate limited) for up to ``patience_s``
    seconds (None: for ever), sleeping what the server's Retry-After asks.

    A 429 is always safe to retry: the limiter refuses before the route runs.
    """
    started = time.monotonic()
    told = False
    while True:
        try:
            return call()
        except RemoteError as exc:
            if exc.status != 429:
                raise
            pause = min(RETRY_AFTER_MAX_S, exc.retry_after or 1.0)
            if patience_s is not None and time.monotonic() - started + pause > patience_s:
                raise
            if not told:
                told = True
                print(
                    f"voxclone: the server is rate-limiting this client; retrying in {pause:.0f} s",
                    file=sys.stderr,
                )
            time.sleep(pause)


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


def note_local_load(unanswered_url: str | None, expected: str) -> None:
    """One line on stderr before a command loads the models in this process,
    so a wait of many seconds is not mistaken for a hang: ``unanswered_url``
    is the server that did not answer (the line then says how to make the
    next command fast); None where the user chose this (``--local``), which
    gets the wait only. ``expected`` is the command's usual load time.

    Only where a person watches (stderr a terminal, like the progress bar): a
    script's stderr keeps its one line per failure."""
    if not _watched(sys.stderr):
        return
    if unanswered_url is None:
        print(f"voxclone: loading the models in this process ({expected})", file=sys.stderr)
        return
    print(
        f"voxclone: no voxclone server at {unanswered_url}: loading the models here "
        f"({expected}); `voxclone serve` in another terminal makes each command fast",
        file=sys.stderr,
    )


def _watched(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # replaced or closed stderr
        return False


def default_server_url(settings: Settings) -> str:
    """The configured local server (a wildcard bind is reached through loopback)."""
    host = settings.host
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    scheme = "https" if settings.ssl_certfile else "http"
    return f"{scheme}://{host}:{settings.port}"


class OtherLibrary(VoxcloneError):
    """The local server serves another voice library than this command's home."""

    status = 409
    code = "other_library"


def server_ready(
    url: str, settings: Settings | None = None, timeout_s: float = PROBE_TIMEOUT_S
) -> bool:
    """True if ``url`` is a voxclone server whose models are loaded.

    With ``settings`` (the CLI found this server on its own, no ``--server``):
    raises :class:`OtherLibrary` when the server's library is not the one of
    ``settings.home`` (issue 46: a clone enrolled through a server of another
    home, then "voice not found" in this one). A server that names no library
    (an older version) is used as before."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/readyz", timeout=timeout_s) as response:
            ready = response.status == 200 and json.load(response).get("status") == "ready"
            theirs = response.headers.get(LIBRARY_HEADER)
    except (OSError, ValueError, urllib.error.URLError):
        return False
    if ready and settings is not None and theirs:
        check_same_library(url, theirs, settings)
    return bool(ready)


def check_same_library(url: str, theirs: str, settings: Settings) -> None:
    """Raise :class:`OtherLibrary` unless ``theirs`` is the library of ``settings``.

    Read after the server answered: a server on this very home has created the
    id by then, so a home without one is another library."""
    ours = read_library_id(settings.home, settings.database_url)
    if ours == theirs:
        return
    raise OtherLibrary(
        f"the voxclone server at {url} serves another voice library "
        f"({_server_home(url)}) than VOXCLONE_HOME={settings.home}: "
        f"use --server {url} to use its library anyway, or --local to use this one "
        "(loads the models here)",
        field="server",
    )


def _server_home(url: str) -> str:
    """The server's home as its /v1/info tells an admin; a placeholder otherwise."""
    try:
        info = call_json(url, "GET", "/v1/info", patience_s=0)
        home = info.get("library", {}).get("home")
    except (VoxcloneError, OSError, ValueError, AttributeError):
        home = None
    return f"its home: {home}" if isinstance(home, str) and home else "another home"


def speak_remote(url: str, body: dict[str, Any], api_key: str | None = None) -> RemoteAudio:
    """POST ``body`` to ``/v1/tts``; the whole audio file, or RemoteError."""
    payload = {k: v for k, v in body.items() if v is not None}

    def once() -> RemoteAudio:
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

    return retrying(once)


def call_json(
    url: str,
    method: str,
    path: str,
    *,
    body: dict[str, Any] | None = None,
    form: Sequence[tuple[str, str]] = (),
    files: Sequence[tuple[str, str, bytes]] = (),
    api_key: str | None = None,
    patience_s: float | None = RATE_LIMIT_PATIENCE_S,
) -> dict[str, Any]:
    """One JSON API call: a JSON ``body``, or a multipart ``form`` with ``files``
    (field, file name, bytes); the decoded answer, or RemoteError. Rate-limited
    answers are retried for ``patience_s`` (see :func:`retrying`)."""
    data: bytes | None = None
    content_type = None
    if files or form:
        data, content_type = multipart(form, files)
    elif body is not None:
        data, content_type = json.dumps(body).encode(), "application/json"

    def once() -> dict[str, Any]:
        request = _request(url, path, method, data, content_type, api_key)
        with _opened(request, url) as response:
            answer: dict[str, Any] = json.load(response)
            return answer

    return retrying(once, patience_s=patience_s)


@contextlib.contextmanager
def opened_stream(
    url: str,
    path: str,
    *,
    method: str = "GET",
    body: dict[str, Any] | None = None,
    api_key: str | None = None,
) -> Iterator[Any]:
    """An open response to read as it arrives (server-sent events, audio);
    a 429 before it opens is retried for as long as it lasts."""
    data = None if body is None else json.dumps(body).encode()
    content_type = None if body is None else "application/json"

    def once() -> Any:
        return _urlopen(_request(url, path, method, data, content_type, api_key), url)

    response = retrying(once, patience_s=None)
    with response:
        yield response


def download(link: str, dest: Any) -> int:
    """Copy what ``link`` (an absolute URL, e.g. a job's signed audio link)
    answers into the binary file ``dest``; the number of bytes."""
    request = urllib.request.Request(link, method="GET")
    total = 0
    with _opened(request, link) as response:
        while chunk := response.read(1 << 16):
            dest.write(chunk)
            total += len(chunk)
    return total


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


def _urlopen(request: urllib.request.Request, url: str) -> Any:
    """``urlopen`` whose failures are RemoteErrors with the server's own message."""
    try:
        return urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        message, field, limit = _error_details(exc)
        raise RemoteError(
            message, exc.code, _retry_after(exc.headers), field=field, limit=limit
        ) from None
    except (OSError, urllib.error.URLError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServerUnreachable(
            f"no voxclone server answers at {url} "
            f"({getattr(reason, 'strerror', None) or reason}); is it running (voxclone serve)?",
            503,
        ) from None


@contextlib.contextmanager
def _opened(request: urllib.request.Request, url: str) -> Iterator[Any]:
    with _urlopen(request, url) as response:
        yield response


def _error_details(exc: urllib.error.HTTPError) -> tuple[str, str | None, Any]:
    """(message, field, limit) of the server's JSON error body."""
    try:
        error = json.loads(exc.read().decode("utf-8", "replace")).get("error", {})
        field = error.get("field")
        return (
            str(error.get("message") or exc.reason),
            field if isinstance(field, str) else None,
            error.get("limit"),
        )
    except (ValueError, AttributeError):
        return f"server answered {exc.code} {exc.reason}", None, None


def _retry_after(headers: Any) -> float | None:
    try:
        value = float(headers.get("Retry-After", ""))
    except (TypeError, ValueError, AttributeError):
        return None
    return value if value >= 0 else None
