"""Wyoming events read and checked with the limits HTTP requests get.

A Wyoming event is a JSON header line, then ``data_length`` bytes of JSON
data and ``payload_length`` bytes of payload. The ``wyoming`` package's own
reader trusts all of it; here every part is bounded before it is buffered
and every JSON part goes through the HTTP body guard (api/input_guard.py:
nesting depth, finite numbers, no lone surrogates), because a client that
sent ``"data_length": 1e400`` (OverflowError), a header nested thousands
deep (RecursionError), text with a lone surrogate (UnicodeEncodeError) or a
number as its text (AttributeError) ended its connection with an unhandled
exception, or an "internal error".

A refused event raises :class:`EventRefused` with the error the client is
answered with. It is ``fatal`` when the stream cannot be read on from there
(the header is not JSON, or its lengths are not byte counts): the handler
sends the error and closes the connection. Otherwise the event's bytes were
consumed whole and the connection serves the next event.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from wyoming.event import Event

from voxclone.api.input_guard import UnsafeJSON, check_json, has_lone_surrogate
from voxclone.errors import InvalidInput, PayloadTooLarge, VoxcloneError

# Events whose data carries text to speak, and the key it is under.
TEXT_EVENTS = frozenset({"synthesize", "synthesize-chunk"})
VOICE_EVENTS = frozenset({"synthesize", "synthesize-start"})
_VOICE_KEYS = ("name", "language", "speaker")


class EventRefused(Exception):
    def __init__(self, error: VoxcloneError, *, fatal: bool, event_type: str = "") -> None:
        super().__init__(error.message)
        self.error = error
        self.fatal = fatal
        self.event_type = event_type  # when the header said it ("" if not)


def _parse(raw: bytes, part: str) -> tuple[Any, UnsafeJSON | None]:
    """``raw`` as JSON and what the HTTP guard finds wrong with it (None: nothing).
    ValueError when it is not JSON or too deep to parse."""
    try:
        check_json(raw)
        problem = None
    except UnsafeJSON as exc:
        problem = UnsafeJSON(exc.message, f"{part}.{exc.field}" if exc.field else part)
    try:
        return json.loads(raw), problem
    except RecursionError:
        raise ValueError(problem.message if problem else "nested too deeply") from None


def _length(header: dict[str, Any], key: str, max_bytes: int) -> int:
    value = header.get(key)
    if value is None:
        return 0
    # A byte count: a whole number (1e400, 1.5, true and "7" are not).
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EventRefused(
            InvalidInput(f"{key} must be a whole number of bytes", field=key), fatal=True
        )
    if value > max_bytes:
        raise EventRefused(
            PayloadTooLarge(
                f"{key} is larger than {max_bytes} bytes", field=key, limit=max_bytes, value=value
            ),
            fatal=True,
        )
    return value


async def read_event(reader: asyncio.StreamReader, max_bytes: int) -> Event | None:
    """One event (header line, optional JSON data, optional payload); None at
    the end of the stream or when it ends mid-event. Raises EventRefused for
    an event refused (``fatal``: the connection cannot go on)."""
    try:
        line = await reader.readline()  # the reader's own limit bounds it (64 KiB)
    except ValueError:  # a header line over the reader's limit
        raise EventRefused(
            PayloadTooLarge("event header line is too long", field="event"), fatal=True
        ) from None
    if not line:
        return None
    try:
        header, problem = _parse(line, "header")
    except ValueError as exc:
        raise EventRefused(
            InvalidInput(f"event header is not a JSON object: {str(exc)[:80]}", field="event"),
            fatal=True,
        ) from None
    if not isinstance(header, dict):
        raise EventRefused(
            InvalidInput("event header is not a JSON object", field="event"), fatal=True
        )
    data_length = _length(header, "data_length", max_bytes)
    payload_length = _length(header, "payload_length", max_bytes)
    try:
        raw_data = await reader.readexactly(data_length) if data_length else b""
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        return None  # the client left mid-event
    # From here the event's bytes are consumed: a refusal leaves the stream readable.
    event_type = header.get("type")
    named = event_type[:40] if isinstance(event_type, str) else ""

    def refused(message: str, field: str | None) -> EventRefused:
        return EventRefused(InvalidInput(message, field=field), fatal=False, event_type=named)

    data = header.get("data") or {}
    if raw_data:
        try:
            extra, extra_problem = _parse(raw_data, "data")
        except ValueError as exc:
            raise refused(f"event data is not JSON: {str(exc)[:80]}", "data") from None
        problem = problem or extra_problem
        if not isinstance(extra, dict) or not isinstance(data, dict):
            raise refused("event data is not a JSON object", "data")
        data = {**data, **extra}
    if problem is not None:
        raise refused(problem.message, problem.field)
    if not isinstance(event_type, str) or not isinstance(data, dict):
        raise refused("an event needs a string type and object data", "type")
    return Event(type=event_type, data=data, payload=payload)


def check_event(event: Event, max_text_chars: int) -> None:
    """InvalidInput / PayloadTooLarge for what HTTP refuses in a speech
    request's fields: text that is not a string, too long or not valid
    Unicode; a voice that is not an object of strings; a text_format that is
    not a string."""
    data = event.data
    if event.type in TEXT_EVENTS and "text" in data:
        check_text(data["text"], max_text_chars)
    if event.type in VOICE_EVENTS:
        voice = data.get("voice")
        if voice is not None:
            if not isinstance(voice, dict):
                raise InvalidInput("voice must be an object", field="voice")
            for key in _VOICE_KEYS:
                if not isinstance(voice.get(key), str | None):
                    raise InvalidInput(f"voice.{key} must be a string", field=f"voice.{key}")
        if not isinstance(data.get("text_format"), str | None):
            raise InvalidInput("text_format must be a string", field="text_format")


def check_text(text: Any, max_text_chars: int) -> None:
    if not isinstance(text, str):
        raise InvalidInput("text must be a string", field="text")
    if len(text) > max_text_chars:
        raise PayloadTooLarge(
            f"text is longer than {max_text_chars} characters",
            field="text",
            limit=max_text_chars,
            value=len(text),
        )
    if has_lone_surrogate(text):
        raise InvalidInput("text contains a lone UTF-16 surrogate (invalid Unicode)", field="text")
