"""The stream-input WebSocket on a real server (uvicorn on 127.0.0.1, the real
Kokoro engine), with a plain ``websockets`` client."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tests.api.realtime_client import Received, drain, open_socket, send, speak, ws_url

pytestmark = pytest.mark.models

VOICE = "clear_female"


def test_stream_input_speaks_text_with_its_alignment(live_server: Callable[..., Any]) -> None:
    with live_server() as server:
        got = speak(
            server.url,
            VOICE,
            ["Hello there, ", "my good ", "friend. ", "It is 3.5 ", "degrees today."],
            output_format="pcm_24000",
        )
    assert got.errors() == []
    assert got.close_code == 1000
    audio = got.audio()
    assert len(audio) % 2 == 0 and len(audio) / 2 / 24000 > 1.5
    assert got.messages[-1][1]["isFinal"] is True
    spoken = got.chars()
    for word in ("Hello", "there", "friend", "3.5", "degrees", "today"):
        assert word in spoken
    for _, m in got.messages:
        if m.get("alignment"):
            a = m["alignment"]
            assert len(a["chars"]) == len(a["charStartTimesMs"]) == len(a["charsDurationsMs"])
            assert a["charStartTimesMs"] == sorted(a["charStartTimesMs"])


def test_first_clause_is_spoken_before_the_text_ends(live_server: Callable[..., Any]) -> None:
    with (
        live_server() as server,
        open_socket(ws_url(server.url, VOICE, output_format="pcm_16000")) as ws,
    ):
        send(ws, text=" ")
        send(ws, text="Well, I looked into it, ")
        sent = time.perf_counter()
        first = json.loads(ws.recv(timeout=30))
        assert first.get("audio"), first
        latency = time.perf_counter() - sent
        send(ws, text="")
        rest = drain(ws, Received())
    assert rest.close_code == 1000
    assert latency < 10.0


@pytest.mark.parametrize("fmt", ["pcm_16000", "ulaw_8000", "mp3_44100_128"])
def test_output_formats(live_server: Callable[..., Any], fmt: str) -> None:
    with live_server() as server:
        got = speak(server.url, VOICE, ["Good morning to you."], output_format=fmt)
    audio = got.audio()
    assert got.close_code == 1000 and audio
    if fmt == "pcm_16000":
        seconds = len(audio) / 2 / 16000
    elif fmt == "ulaw_8000":
        seconds = len(audio) / 8000
        from voxclone.synth.audio.ulaw import ulaw_decode

        assert np.abs(ulaw_decode(audio)).max() > 0.05  # speech, not silence
    else:
        assert audio[:3] == b"ID3" or (audio[0] == 0xFF and audio[1] & 0xE0 == 0xE0)
        seconds = 1.0
    assert 0.6 < seconds < 5.0
