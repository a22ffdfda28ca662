"""Headers that must come once: a second copy lets two readers see two requests.

ASGI hands the headers over as a list of byte pairs, repeats included.
Starlette's ``Headers.get`` returns the first copy, a dict built from the list
keeps the last, and the guards and routes used both: with ``Content-Type:
application/json`` then ``Content-Type: text/plain`` the JSON guard saw plain
text and waved the body through while the route parsed it as JSON; with a
foreign ``Host`` then a loopback one, the Host guard saw loopback. Refusing
repeats of the headers a decision rests on, before anything reads them, leaves
one value that every reader agrees on.
"""

from __future__ import annotations

from typing import Any

from voxclone.api.errors import voxclone_error_response
from voxclone.errors import BadRequest

# Headers the guards and routes decide on; each may appear once (RFC 9110
# allows repeats only of list-valued fields, and none of these is one).
SINGLE_HEADERS = (b"host", b"content-type", b"content-length")


def header_values(scope: Any, name: bytes) -> list[bytes]:
    """Every value of header ``name`` (lower-case) in an ASGI scope, in order."""
    return [value for key, value in scope.get("headers", ()) if key.lower() == name]


def repeated_header(scope: Any) -> tuple[str, int] | None:
    """(name, count) of the first single-valued header sent more than once, else None."""
    counts: dict[bytes, int] = {}
    for key, _ in scope.get("headers", ()):
        key = key.lower()
        if key in SINGLE_HEADERS:
            counts[key] = counts.get(key, 0) + 1
    for name in SINGLE_HEADERS:
        if counts.get(name, 0) > 1:
            return name.decode("ascii"), counts[name]
    return None


class HeaderHygieneMiddleware:
    """400 (JSON naming the header) for a repeated Host, Content-Type or Content-Length.

    Runs before every other guard, on the raw header list.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        repeated = repeated_header(scope)
        if repeated is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            # Closing before the handshake is accepted refuses it (403).
            await send({"type": "websocket.close", "code": 1008})
            return
        name, count = repeated
        error = BadRequest(
            f"the request has {count} '{name}' headers; send exactly one",
            field=name,
            limit=1,
        )
        await voxclone_error_response(error)(scope, receive, send)
