"""Issue 37's hostile Wyoming events against the real server and engine on
loopback: each is answered with an ``error`` event (never an internal error
or a traceback in the log), the connection goes on where the stream can
still be framed and closes where it cannot, and a client speaking on
another connection meanwhile is not disturbed.

The byte-level corpus (no engine) is tests/unit/test_wyoming_events.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from test_wyoming import _Server  # the same thread-hosted server as the Wyoming tests
from wyoming.error import Error
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.tts import Synthesize

from voxclone.api.wyoming_server import BUILTINS_ONLY, WyomingTts

pytestmark = pytest.mark.models

HOST = "127.0.0.1"
READ_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def server(runtime: Any) -> Iterator[_Server]:
    with _Server(WyomingTts.from_runtime(runtime, BUILTINS_ONLY)) as running:
        yield running


def _line(header: dict[str, Any]) -> bytes:
    return json.dumps(header).encode() + b"\n"


def _synthesize_data(data: dict[str, Any] | bytes) -> bytes:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return _line({"type": "synthesize", "data_length": len(raw)}) + raw


# name: (bytes sent, error code answered, connection still usable)
HOSTILE: dict[str, tuple[bytes, str, bool]] = {
    "text-not-a-string": (_synthesize_data({"text": 123}), "invalid_input", True),
    "lone-surrogate": (_synthesize_data(b'{"text": "a\\ud800b"}'), "invalid_input", True),
    "volume-overflow": (
        _synthesize_data({"text": '<speak><prosody volume="+7000dB">Hi</prosody></speak>'}),
        "invalid_ssml",
        True,
    ),
    "breaks-x1000": (
        _synthesize_data({"text": "<speak>" + '<break time="10s"/>word.' * 1000 + "</speak>"}),
        "payload_too_large",
        True,
    ),
    "unspeakable-ipa": (_synthesize_data({"text": "I say [x](/ǃǂǁ/)."}), "invalid_phonemes", True),
    "data_length-1e400": (
        b'{"type": "synthesize", "data_length": 1e400}\n',
        "invalid_input",
        False,
    ),
    "deep-header": (
        b'{"type": "synthesize", "data": {"a": ' + b"[" * 20_000 + b"]" * 20_000 + b"}}\n",
        "invalid_input",
        False,
    ),
}


async def _events_until(
    reader: asyncio.StreamReader, *types: str
) -> tuple[list[Event], Event | None]:
    """Events up to the first of ``types`` or an error; the last is None when
    the server closed the connection first."""
    seen: list[Event] = []
    while True:
        event = await asyncio.wait_for(async_read_event(reader), READ_TIMEOUT_S)
        if event is None:
            return seen, None
        seen.append(event)
        if event.type in types or Error.is_type(event.type):
            return seen, event


async def _speak_hi(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """Bytes of audio for "Hi." on this connection."""
    await async_write_event(Synthesize(text="Hi.").event(), writer)
    seen, last = await _events_until(reader, "audio-stop")
    assert last is not None and last.type == "audio-stop", [e.type for e in seen]
    return sum(len(e.payload or b"") for e in seen if e.type == "audio-chunk")


def test_hostile_events_get_error_events_and_other_clients_are_unaffected(
    server: _Server, caplog: pytest.LogCaptureFixture
) -> None:
    async def exchange() -> dict[str, tuple[str, str, bool]]:
        # A client that speaks before, between and after the hostile ones.
        bystander = await asyncio.open_connection(HOST, server.port)
        assert await _speak_hi(*bystander) > 0
        answers = {}
        for name, (raw, _code, _usable) in HOSTILE.items():
            reader, writer = await asyncio.open_connection(HOST, server.port)
            writer.write(raw)
            await writer.drain()
            _, error = await _events_until(reader, "audio-stop")
            assert error is not None and Error.is_type(error.type), name
            answer = Error.from_event(error)
            try:
                usable = await _speak_hi(reader, writer) > 0
            except (AssertionError, ConnectionError):
                usable = False
            answers[name] = (answer.code or "", answer.text, usable)
            writer.close()
            assert await _speak_hi(*bystander) > 0, name
        bystander[1].close()
        return answers

    with caplog.at_level(logging.WARNING):
        answers = asyncio.run(exchange())
    for name, (_raw, code, usable) in HOSTILE.items():
        assert answers[name][0] == code, (name, answers[name])
        assert answers[name][2] is usable, (name, answers[name])
        assert "internal" not in answers[name][1], (name, answers[name])
    # No traceback, no "request failed", no task that died with its exception.
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]
