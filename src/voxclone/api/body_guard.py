"""One decision about every request body: its kind, whether the route reads it, its size.

``media_kind`` classifies a Content-Type; this guard and every route that
reads a body by its type (``routes_tts._parse_body``) call it, so what the
guard lets through and what a route parses can never differ again. (The
JSON guard used to check ``application/json`` and ``+json`` while
``/v1/tts`` parsed anything starting with ``application/json`` as JSON:
``application/jsonx`` bodies reached the parser unchecked, and a lone
surrogate or 3,000 nested brackets ended in a 500.)

A route accepts exactly what it declares: ``application/json`` (parameters
such as ``charset`` allowed) for a JSON body model, ``multipart/form-data``
and ``application/x-www-form-urlencoded`` for form fields, and for a route
reading the request itself the types its ``openapi_extra`` documents. A body
of any other type, or with no Content-Type, is refused with 415 before a
byte of it is parsed. ``+json`` types are refused too: no route documents
one and no client of ours sends one, and each extra type is another door
to keep guarded. A route that takes no body (and a path no route serves)
may be sent any of the three kinds, checked alike, and nothing else: the
guard stays closed for a route it does not know.

Bodies that carry text and no files (JSON, URL-encoded forms) are counted as
they arrive and refused (413) above ``text_body_limit``, which any valid
request stays under; only then is JSON checked by ``input_guard.check_json``.
Multipart uploads keep the overall ``max_upload_mb`` limit.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from fastapi import params
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.routing import BaseRoute, Match

from voxclone.api.errors import voxclone_error_response
from voxclone.api.header_guard import header_values
from voxclone.api.input_guard import NOT_JSON, UnsafeJSON, check_json
from voxclone.errors import BadRequest, InvalidInput, PayloadTooLarge, UnsupportedMedia

# Where the guard leaves a JSON body it parsed, in the request's state.
PARSED_JSON = "voxclone_parsed_json"


async def json_body(request: Request) -> Any:
    """A route's JSON body: the one the guard parsed (and checked), parsed
    here only when it could not (not JSON: a 400 naming the body) or did not run."""
    raw = request.scope.get("state", {}).get(PARSED_JSON, NOT_JSON)
    if raw is NOT_JSON:
        try:
            raw = await request.json()
        except ValueError:
            raise InvalidInput("the request body is not valid JSON", field="body") from None
    return raw


class MediaKind(enum.Enum):
    JSON = "application/json"
    MULTIPART = "multipart/form-data"
    URLENCODED = "application/x-www-form-urlencoded"
    ABSENT = "none"  # no Content-Type header, or an empty one
    OTHER = "other"


FORM_KINDS = frozenset({MediaKind.MULTIPART, MediaKind.URLENCODED})
# Every kind of body this guard can vouch for.
CHECKED_KINDS = FORM_KINDS | {MediaKind.JSON}
_BY_MEDIA = {kind.value: kind for kind in (MediaKind.JSON, *FORM_KINDS)}
# The order types are listed in when a 415 says what a route accepts.
_LISTED = (MediaKind.JSON, MediaKind.MULTIPART, MediaKind.URLENCODED)

# Bytes one character of text can take in a body: JSON escapes a code point
# outside the BMP as a surrogate pair, "\\ud83d\\ude00" (12 bytes), and a
# URL-encoded form writes each of its 4 UTF-8 bytes as "%XX" (12 bytes).
# Python counts that character once against max_text_chars.
BYTES_PER_TEXT_CHAR = 12
# The other fields (voice, model, language, instructions...), key names and
# whitespace of a valid request: a few hundred bytes in practice.
TEXT_BODY_SLACK = 64 * 1024


def text_body_limit(max_text_chars: int) -> int:
    """Largest JSON or URL-encoded body a valid request can need.

    12 bytes for each character of the longest text the server speaks, plus
    64 KiB for the rest: 1,265,536 bytes for the default 100,000 characters.
    """
    return BYTES_PER_TEXT_CHAR * max_text_chars + TEXT_BODY_SLACK


def media_kind(content_type: str | None) -> MediaKind:
    """The kind of body a Content-Type value announces (parameters ignored)."""
    if content_type is None:
        return MediaKind.ABSENT
    media = content_type.split(";", 1)[0].strip().lower()
    if not media:
        return MediaKind.ABSENT
    return _BY_MEDIA.get(media, MediaKind.OTHER)


def route_media(route: APIRoute) -> frozenset[MediaKind]:
    """The body kinds ``route`` reads; empty when it takes no body."""
    if route.body_field is not None:
        if isinstance(route.body_field.field_info, params.Form):  # File is a Form
            return FORM_KINDS
        return frozenset({MediaKind.JSON})
    # A route reading the request itself documents what it reads.
    extra = route.openapi_extra or {}
    documented = extra.get("requestBody", {}).get("content", {})
    kinds: set[MediaKind] = set()
    for media in documented:
        kind = media_kind(media)
        # Starlette's form parser reads both form encodings alike.
        kinds |= FORM_KINDS if kind in FORM_KINDS else {kind}
    kinds -= {MediaKind.ABSENT, MediaKind.OTHER}
    return frozenset(kinds)


def accepted_types(kinds: frozenset[MediaKind]) -> list[str]:
    return [kind.value for kind in _LISTED if kind in kinds]


def unsupported(content_type: str | None, kinds: frozenset[MediaKind]) -> UnsupportedMedia:
    """The 415 for a body of ``content_type`` on a route that reads ``kinds``."""
    accepted = accepted_types(kinds)
    listed = " or ".join(accepted)
    if media_kind(content_type) is MediaKind.ABSENT:
        message = f"the request body has no Content-Type; send {listed}"
    else:
        shown = (content_type or "")[:80]
        message = f"Content-Type '{shown}' is not accepted here; send {listed}"
    return UnsupportedMedia(message, field="content-type", limit=accepted)


class BodyGuardMiddleware:
    """Refuse a body the route does not read (415), is too large (413) or unsafe (400).

    Runs inside the overall body-size limit and after the header guard (one
    Content-Type at most). JSON and URL-encoded bodies are buffered up to
    the text-body limit, checked, then replayed to the route; after the body
    ``receive`` is the server's again, so routes still hear a disconnect.
    """

    def __init__(self, app: Any, *, routes: Sequence[BaseRoute], text_body_bytes: int) -> None:
        """``routes``: the API routes in the order the app's router tries them."""
        self.app = app
        self.routes = list(routes)
        self.text_body_bytes = text_body_bytes
        # By id: routes define __eq__ and so are unhashable; they live as long as the app.
        self._kinds: dict[int, frozenset[MediaKind]] = {}

    def _route_kinds(self, scope: Any) -> frozenset[MediaKind]:
        """What the route that will answer reads: the first full match, as the router picks."""
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                if not isinstance(route, APIRoute):
                    return frozenset()
                key = id(route)
                if key not in self._kinds:
                    self._kinds[key] = route_media(route)
                return self._kinds[key]
        return frozenset()  # 404 or 405: the router answers without reading a body

    def _too_large(self) -> PayloadTooLarge:
        limit = self.text_body_bytes
        return PayloadTooLarge(
            f"a JSON or form body is limited to {limit} bytes (12 bytes for each character "
            "of the longest text the server speaks, plus 64 KiB for the other fields)",
            field="body",
            limit=limit,
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # A route that reads no body, or a path no route serves, may still be
        # sent only what this guard checks: safety never rests on the table.
        kinds = self._route_kinds(scope) or CHECKED_KINDS
        values = header_values(scope, b"content-type")
        content_type = values[0].decode("latin-1") if values else None
        kind = media_kind(content_type)
        if kind is MediaKind.MULTIPART and kind in kinds:
            await self.app(scope, receive, send)  # uploads: max_upload_mb applies
            return
        if kind not in kinds:
            first = await receive()
            if first["type"] != "http.request":
                return  # the client left before sending its body
            if first.get("body", b"") or first.get("more_body", False):
                await voxclone_error_response(unsupported(content_type, kinds))(
                    scope, receive, send
                )
                return
            # No body at all: the route says what it misses.
            await self.app(scope, _replaying(b"", receive), send)
            return
        try:
            body = await self._read_text_body(scope, receive)
        except _ClientLeft:
            return  # nothing to answer, and a partial body must not reach the route
        if body is None:
            await voxclone_error_response(self._too_large())(scope, receive, send)
            return
        if kind is MediaKind.JSON and body:
            try:
                tree = check_json(body)
            except UnsafeJSON as exc:
                error = BadRequest(exc.message, field=exc.field or "body")
                await voxclone_error_response(error)(scope, receive, send)
                return
            if tree is not NOT_JSON:
                # Kept for a route that reads its body itself (routes_tts): the
                # body is parsed once, here.
                scope.setdefault("state", {})[PARSED_JSON] = tree
        await self.app(scope, _replaying(body, receive), send)

    async def _read_text_body(self, scope: Any, receive: Any) -> bytes | None:
        """The whole body, or None once it is known to pass the text-body limit."""
        for value in header_values(scope, b"content-length"):
            if value.strip().isdigit() and int(value) > self.text_body_bytes:
                return None  # refused before a byte is read
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise _ClientLeft
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.text_body_bytes:
                return None  # stop reading: the rest never sits in memory
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


class _ClientLeft(Exception):
    """The client disconnected before the end of its body."""


def _replaying(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives ``body`` once, then the server's messages."""
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
