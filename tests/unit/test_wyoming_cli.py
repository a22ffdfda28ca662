"""``voxclone wyoming`` without models: whose voices it offers (decided once at
start-up, from a real key store: Wyoming carries no credentials), and how a
streamed text becomes sentences."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from voxclone.api.cli import _parser
from voxclone.api.cli_wyoming import exposed_owner
from voxclone.api.wyoming_server import BUILTINS_ONLY
from voxclone.config import Settings
from voxclone.errors import InvalidInput, Unauthorized
from voxclone.runtime.keys import KeyStore


def _owner(settings: Settings, *argv: str) -> str:
    return exposed_owner(_parser().parse_args(["wyoming", *argv]), settings)


def test_the_exposed_owner_comes_from_a_tts_key_or_the_operator(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    store = KeyStore(settings.key_database_target)
    tts_key, tts = store.create("home assistant", {"tts"}, owner="family")
    read_key, _ = store.create("reader", {"voices:read"})
    revoked_key, revoked = store.create("old", {"tts"})
    store.revoke(revoked.id)
    store.close()

    assert _owner(settings) == BUILTINS_ONLY == ""  # default: built-ins only
    assert _owner(settings, "--api-key", tts_key) == tts.owner == "family"
    assert _owner(settings, "--owner", "local") == "local"
    for bad in (read_key, revoked_key, "vox_" + "x" * 32):
        with pytest.raises(Unauthorized):
            _owner(settings, "--api-key", bad)
    with pytest.raises(InvalidInput):
        _owner(settings, "--owner", " ")
    with pytest.raises(SystemExit):  # one owner at most
        _owner(settings, "--owner", "local", "--api-key", tts_key)


def test_a_bad_uri_fails_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from voxclone.api.cli import main

    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path))

    assert main(["wyoming", "--uri", "http://127.0.0.1:10200"]) == 2
    assert "--uri" in capsys.readouterr().err
    assert main(["wyoming", "--zeroconf", "--uri", "unix:///tmp/x.sock"]) == 2
    assert "tcp://" in capsys.readouterr().err
    if importlib.util.find_spec("zeroconf") is None:  # optional, not a dependency
        assert main(["wyoming", "--zeroconf"]) == 2
        assert "pip install zeroconf" in capsys.readouterr().err


def _handler(max_chars: int = 1000) -> Any:
    from voxclone.api.wyoming_server import WyomingConfig, WyomingHandler

    config = WyomingConfig("", max_chars, 30.0, 10.0)
    return WyomingHandler(SimpleNamespace(config=config), None, None)  # type: ignore[arg-type]


def _said(handler: Any) -> list[tuple[str, str]]:
    out = []
    while not handler.jobs.empty():
        job = handler.jobs.get_nowait()
        out.append((job.kind, job.text if job.kind == "speak" else job.error.code))
    return out


def test_streamed_text_is_spoken_sentence_by_sentence_as_it_completes() -> None:
    from voxclone.api.wyoming_server import _TextStream

    handler = _handler()
    stream = _TextStream(voice=None, ssml=None)
    for piece in ("The sky is ", "blue today. ", "Birds"):
        handler._add_text(stream, piece)
    assert _said(handler) == [("speak", "The sky is blue today.")]
    for piece in (" sing. I met Dr.", " Smith at ", "9 a.m. Then", "\n", "we left"):
        handler._add_text(stream, piece)
    handler._flush(stream)
    assert _said(handler) == [
        ("speak", "Birds sing."),
        ("speak", "I met Dr. Smith at 9 a.m."),
        ("speak", "Then"),  # a line break ends a sentence, as in split_sentences
        ("speak", "we left"),
    ]

    markup = _TextStream(voice=None, ssml=None)
    for piece in ("<speak>One. ", "Two. <break time='1s'/>", " Three.</speak>"):
        handler._add_text(markup, piece)
    assert _said(handler) == []  # SSML is spoken whole, at the stop
    handler._flush(markup)
    assert _said(handler) == [("speak", "<speak>One. Two. <break time='1s'/> Three.</speak>")]


def test_a_stream_longer_than_the_text_limit_fails_once() -> None:
    from voxclone.api.wyoming_server import _TextStream

    handler = _handler(max_chars=20)
    stream = _TextStream(voice=None, ssml=None)
    for piece in ("Short one. Two", " and a much longer sentence.", " More."):
        handler._add_text(stream, piece)
    handler._flush(stream)
    assert _said(handler) == [("speak", "Short one."), ("fail", "payload_too_large")]
    assert stream.failed


def test_a_sentence_that_never_ends_is_spoken_in_bounded_pieces() -> None:
    from voxclone.api.wyoming_server import MAX_PENDING_CHARS, _TextStream

    handler = _handler(max_chars=100_000)
    stream = _TextStream(voice=None, ssml=None)
    for _ in range(3000):  # an LLM streaming word by word, no full stop
        handler._add_text(stream, "and then ")
    spoken = [text for kind, text in _said(handler) if kind == "speak"]
    assert len(spoken) >= 3000 * 9 // (MAX_PENDING_CHARS + 10)
    assert all(len(text) <= MAX_PENDING_CHARS + 10 for text in spoken)
    assert len(stream.pending) <= MAX_PENDING_CHARS


def test_events_are_read_within_bounds() -> None:
    import asyncio
    import json

    from voxclone.api.wyoming_server import read_event

    def frame(header: dict[str, Any], data: bytes = b"", payload: bytes = b"") -> bytes:
        if data:
            header["data_length"] = len(data)
        if payload:
            header["payload_length"] = len(payload)
        return json.dumps(header).encode() + b"\n" + data + payload

    async def read(raw: bytes, max_bytes: int = 1000) -> Any:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await read_event(reader, max_bytes)

    text = json.dumps({"text": "Hello."}).encode()
    event = asyncio.run(read(frame({"type": "synthesize", "version": "1"}, text, b"\x01\x02")))
    assert (event.type, event.data, event.payload) == (
        "synthesize",
        {"text": "Hello."},
        b"\x01\x02",
    )
    # A header claiming more than the bound is refused before anything is
    # buffered; the stream cannot be read on from there (fatal).
    from voxclone.api.wyoming_events import EventRefused

    def refusal(raw: bytes) -> EventRefused:
        with pytest.raises(EventRefused) as caught:
            asyncio.run(read(raw))
        return caught.value

    too_long = refusal(frame({"type": "synthesize", "data_length": 10**12}))
    assert too_long.fatal and too_long.error.code == "payload_too_large"
    assert refusal(frame({"type": "x"}, payload=b"\x00" * 1001)).fatal
    for bad in (b"not json\n", b"[1, 2]\n"):
        assert refusal(bad).fatal
    # No type: refused, but its bytes were whole, so the connection goes on.
    assert not refusal(b'{"data": {}}\n').fatal
    # Cut short: the client left.
    assert asyncio.run(read(frame({"type": "x"}, b"{}")[:-1])) is None
