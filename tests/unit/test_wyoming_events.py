"""Wyoming events read and checked with the HTTP limits (api/wyoming_events.py),
on the byte level, without a server: the probe's hostile events each become
a typed refusal, fatal only where the stream cannot be read on from.

The same corpus over TCP, against the real server and engine, is in
tests/integration/test_wyoming_hostile.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from wyoming.event import Event

from voxclone.api.input_guard import MAX_JSON_DEPTH
from voxclone.api.wyoming_events import EventRefused, check_event, read_event
from voxclone.errors import VoxcloneError

MAX_BYTES = 10_000
NEXT = b'{"type": "describe"}\n'  # what the client sends after the hostile event


def _frame(header: dict[str, Any] | bytes, data: bytes = b"") -> bytes:
    line = header if isinstance(header, bytes) else json.dumps(header).encode()
    return line + b"\n" + data


async def _read_all(raw: bytes) -> list[Event | EventRefused]:
    """Every event of ``raw`` (a refusal in its place), up to the end or a fatal one."""
    reader = asyncio.StreamReader()
    reader.feed_data(raw)
    reader.feed_eof()
    out: list[Event | EventRefused] = []
    while True:
        try:
            event = await read_event(reader, MAX_BYTES)
        except EventRefused as refused:
            out.append(refused)
            if refused.fatal:
                return out
            continue
        if event is None:
            return out
        out.append(event)


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


HOSTILE = {
    # (raw bytes, fatal, the refused field, error code)
    "data_length-1e400": (b'{"type": "synthesize", "data_length": 1e400}', True, "data_length"),
    "data_length-true": (b'{"type": "synthesize", "data_length": true}', True, "data_length"),
    "payload_length-negative": (b'{"type": "x", "payload_length": -5}', True, "payload_length"),
    "deep-header": (f'{{"type": "x", "data": {{"a": {_deep(20_000)}}}}}'.encode(), True, "event"),
    "header-not-json": (b"\x00\xff garbage", True, "event"),
    "surrogate-in-header-data": (
        b'{"type": "synthesize", "data": {"text": "a\\ud800b"}}',
        False,
        "header.data.text",
    ),
    "nan-in-header": (b'{"type": "describe", "version": NaN}', False, "header.version"),
    "shallow-but-deep-for-http": (
        f'{{"type": "x", "data": {{"a": {_deep(MAX_JSON_DEPTH + 2)}}}}}'.encode(),
        False,
        "header.data.a" + ".0" * (MAX_JSON_DEPTH - 2),
    ),
}


@pytest.mark.parametrize(("raw", "fatal", "field"), list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_headers_are_refused_and_the_stream_goes_on_when_it_can(
    raw: bytes, fatal: bool, field: str
) -> None:
    seen = asyncio.run(_read_all(_frame(raw) + NEXT))
    refused = seen[0]
    assert isinstance(refused, EventRefused)
    assert refused.fatal is fatal and refused.error.status < 500
    assert refused.error.field == field
    if fatal:
        assert len(seen) == 1  # nothing is read past a header that cannot be framed
    else:  # the next event is read whole
        assert [e.type for e in seen[1:] if isinstance(e, Event)] == ["describe"]


def test_data_bytes_are_guarded_like_an_http_body() -> None:
    bad = [
        b'{"text": "x\\udfffy"}',  # lone surrogate
        b'{"text": "hi", "n": 1e400}',  # overflows to infinity
        b'{"text": ' + _deep(4000).encode() + b"}",  # past the recursion limit
        b"not json at all",
        b"[1, 2, 3]",
    ]
    raw = b"".join(_frame({"type": "synthesize", "data_length": len(d)}, d) for d in bad)
    seen = asyncio.run(_read_all(raw + NEXT))
    assert len(seen) == len(bad) + 1
    for refused in seen[:-1]:
        assert isinstance(refused, EventRefused) and not refused.fatal
        assert refused.event_type == "synthesize" and refused.error.field is not None
        assert refused.error.field.startswith("data")
    assert isinstance(seen[-1], Event) and seen[-1].type == "describe"


def test_a_header_line_over_the_readers_limit_is_refused() -> None:
    seen = asyncio.run(_read_all(b'{"type": "x", "pad": "' + b"a" * 70_000 + b'"}\n' + NEXT))
    (refused,) = seen
    assert isinstance(refused, EventRefused) and refused.fatal
    assert refused.error.code == "payload_too_large"


@pytest.mark.parametrize(
    ("event", "code", "field"),
    [
        (Event("synthesize", {"text": 42}), "invalid_input", "text"),
        (Event("synthesize", {"text": ["a"]}), "invalid_input", "text"),
        (Event("synthesize-chunk", {"text": None}), "invalid_input", "text"),
        (Event("synthesize", {"text": "a\ud800b"}), "invalid_input", "text"),
        (Event("synthesize", {"text": "x" * 101}), "payload_too_large", "text"),
        (Event("synthesize", {"text": "hi", "voice": "alice"}), "invalid_input", "voice"),
        (Event("synthesize-start", {"voice": {"name": 7}}), "invalid_input", "voice.name"),
        (Event("synthesize", {"text": "hi", "voice": {"language": {}}}), "invalid_input", None),
        (Event("synthesize", {"text": "hi", "text_format": 1}), "invalid_input", "text_format"),
    ],
)
def test_speech_fields_are_checked_like_http(event: Event, code: str, field: str | None) -> None:
    with pytest.raises(VoxcloneError) as caught:
        check_event(event, max_text_chars=100)
    assert caught.value.code == code
    if field is not None:
        assert caught.value.field == field


def test_well_formed_events_pass() -> None:
    for event in (
        Event("synthesize", {"text": "Hello.", "voice": {"name": "clear_female"}}),
        Event("synthesize", {"text": "<speak>Hi</speak>", "text_format": "ssml"}),
        Event("synthesize-start", {"voice": {"language": "en_US"}}),
        Event("synthesize-chunk", {"text": "more "}),
        Event("describe", {}),
        Event("audio-chunk", {"text": 5}),  # not ours to speak: left alone
    ):
        check_event(event, max_text_chars=100)


def test_a_refused_chunk_fails_its_stream_once() -> None:
    from types import SimpleNamespace

    from wyoming.tts import SynthesizeStart, SynthesizeStop

    from voxclone.api.wyoming_server import WyomingConfig, WyomingHandler

    tts = SimpleNamespace(config=WyomingConfig("", 100, 30.0, 10.0))
    handler = WyomingHandler(tts, None, None)  # type: ignore[arg-type]
    handler.worker = SimpleNamespace()  # type: ignore[assignment]  # no worker: the queue is read here

    async def send() -> None:
        await handler.handle_event(SynthesizeStart().event())
        await handler.handle_event(Event("synthesize-chunk", {"text": "Fine. And"}))
        await handler.handle_event(Event("synthesize-chunk", {"text": 5}))
        await handler.handle_event(Event("synthesize-chunk", {"text": "more. Text."}))
        await handler.handle_event(SynthesizeStop().event())

    asyncio.run(send())
    jobs = []
    while not handler.jobs.empty():
        job = handler.jobs.get_nowait()
        jobs.append((job.kind, job.error.code if job.error else job.text))
    # The stream fails at the bad chunk: "And" and the text after it are
    # dropped, and "Fine." too when the worker reaches it (a failed stream's
    # speech is skipped); its stop is still answered.
    assert jobs == [
        ("start", ""),
        ("speak", "Fine."),
        ("fail", "invalid_input"),
        ("stop", ""),
    ]
