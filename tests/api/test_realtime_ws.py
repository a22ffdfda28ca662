"""The stream-input WebSocket on a real server (uvicorn on 127.0.0.1, the real
Kokoro engine), with a plain ``websockets`` client."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tests.api.realtime_client import Received, drain, open_socket, send, speak, ws_url
from websockets.exceptions import ConnectionClosed

# The tests that time the server (first audio, engine idle after a cancel,
# an idle timer, 8 sessions at once) are marked `timed`: make test runs them
# alone; the rest check messages and run beside other tests.
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


@pytest.mark.timed
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


def _wait_idle(runtime: Any, since: float, limit_s: float = 120.0) -> float:
    """Seconds from ``since`` until the engine is idle, having started no new
    chunk (the one in flight at the cancel is cut by the scheduler's cancel
    watcher: runtime/scheduler/workers.py)."""
    (stack,) = runtime.engines.values()
    at_cancel = stack.scheduler.stats()
    while time.perf_counter() - since < limit_s:
        if runtime.speech_idle():
            done = stack.scheduler.stats()
            assert done.completed <= at_cancel.completed + at_cancel.in_flight
            return time.perf_counter() - since
        time.sleep(0.002)
    raise AssertionError(f"engine work went on: {stack.scheduler.stats()}")


LONG = " ".join(["This sentence is one of many that the agent will never finish."] * 8)


@pytest.mark.timed
def test_close_context_stops_its_audio_and_engine_work(live_server: Callable[..., Any]) -> None:
    """Barge-in: after close_context's acknowledgement no audio comes for the
    context, and the scheduler has no work left for it."""
    with live_server() as server:
        runtime = server.app.state.runtime
        url = ws_url(server.url, VOICE, multi=True, output_format="pcm_16000")
        with open_socket(url) as ws:
            send(ws, text=" ", context_id="a")
            send(ws, text=LONG, context_id="a")
            first = json.loads(ws.recv(timeout=60))
            assert first.get("audio") and first["contextId"] == "a"
            asked = time.perf_counter()
            send(ws, context_id="a", close_context=True)
            got = Received()
            while True:  # up to the acknowledgement
                m = json.loads(ws.recv(timeout=30))
                got.messages.append((time.perf_counter(), m))
                if m.get("isFinal"):
                    break
            acked = time.perf_counter() - asked
            stopped = _wait_idle(runtime, asked)
            # A second context on the same socket still speaks.
            send(ws, text="Still here.", context_id="b", flush=True)
            send(ws, close_socket=True)
            after = drain(ws, Received())
    assert all(m.get("contextId") != "a" for _, m in after.messages)
    assert after.audio("b") and after.close_code == 1000
    print(f"close_context: ack {acked * 1000:.0f} ms, engine idle {stopped * 1000:.0f} ms")
    # Issue 48 asks for 100 ms; 1 s leaves room for a loaded test host (the
    # chunk in flight ran 12.8 s to its end before calls could be cut).
    assert stopped < 1.0


@pytest.mark.timed
def test_client_leaving_stops_engine_work(live_server: Callable[..., Any]) -> None:
    with live_server() as server:
        runtime = server.app.state.runtime
        with open_socket(ws_url(server.url, VOICE, output_format="pcm_16000")) as ws:
            send(ws, text=" ")
            send(ws, text=LONG)
            send(ws, text="")
            assert json.loads(ws.recv(timeout=60)).get("audio")
        left = time.perf_counter()
        stopped = _wait_idle(runtime, left)
    print(f"disconnect: engine idle {stopped * 1000:.0f} ms")
    assert stopped < 1.0  # the chunk in flight is cut too


@pytest.mark.parametrize(
    ("message", "field", "code"),
    [
        ("not json", "message", 1007),
        ('["a list"]', "message", 1007),
        ('{"text": 5}', "text", 1007),
        ('{"text": " ", "flush": "yes"}', "flush", 1007),
        ('{"text": " ", "voice_settings": {"speed": "fast"}}', "voice_settings.speed", 1007),
        ('{"text": " ", "generation_config": {"chunk_length_schedule": "x"}}',
         "generation_config.chunk_length_schedule", 1007),
    ],
)  # fmt: skip
def test_malformed_first_messages_get_an_error_and_a_clean_close(
    live_server: Callable[..., Any], message: str, field: str, code: int
) -> None:
    with live_server() as server, open_socket(ws_url(server.url, VOICE)) as ws:
        ws.send(message)
        got = drain(ws, Received(), timeout_s=20)
    (error,) = got.errors()
    assert error["error"]["field"] == field and error["message"]
    assert got.close_code == code


def test_refusals_name_their_field(live_server: Callable[..., Any]) -> None:
    with live_server() as server:
        cases = [
            (ws_url(server.url, VOICE, output_format="wav_9"), "output_format", 1008),
            (ws_url(server.url, "no_such_voice"), None, 1008),
            (ws_url(server.url, VOICE, inactivity_timeout="999"), "inactivity_timeout", 1008),
        ]
        for url, field, code in cases:
            with open_socket(url) as ws:
                # The query is refused before the first message is read: the
                # close may come before this send (then it fails; the error
                # message is still read below).
                with contextlib.suppress(ConnectionClosed):
                    send(ws, text=" ")
                got = drain(ws, Received(), timeout_s=20)
            (error,) = got.errors()
            assert got.close_code == code, (url, got.messages)
            if field is not None:
                assert error["error"]["field"] == field
        # A binary frame mid-session.
        with open_socket(ws_url(server.url, VOICE)) as ws:
            send(ws, text=" ")
            ws.send(b"\x00\x01")
            got = drain(ws, Received(), timeout_s=20)
        assert got.close_code == 1007 and got.errors()[0]["error"]["field"] == "message"


def test_keys_header_first_message_and_bearer(live_server: Callable[..., Any]) -> None:
    with live_server() as server:
        key, _ = server.app.state.keys.create("agent", {"tts"}, owner="agent")
        no_tts, _ = server.app.state.keys.create("reader", {"voices:read"}, owner="agent")
        url = ws_url(server.url, VOICE, output_format="pcm_16000")
        for headers, first in [
            ({"xi-api-key": key}, {}),
            ({}, {"xi_api_key": key}),
            ({"Authorization": f"Bearer {key}"}, {}),
        ]:
            with open_socket(url, headers) as ws:
                send(ws, text=" ", **first)
                send(ws, text="Hi.")
                send(ws, text="")
                assert drain(ws, Received()).audio()
        for headers, status in [({}, "unauthorized"), ({"xi-api-key": no_tts}, "forbidden")]:
            with open_socket(url, headers) as ws:
                send(ws, text=" ")
                got = drain(ws, Received(), timeout_s=20)
            assert got.close_code == 1008 and got.errors()[0]["error"]["code"] == status


@pytest.mark.timed
def test_limits_contexts_idle_and_rate(live_server: Callable[..., Any]) -> None:
    from voxclone.service.realtime_session import RealtimeLimits

    with live_server() as server:
        server.app.state.realtime_limits = RealtimeLimits(
            max_contexts=1, inactivity_timeout_s=0.5, text_burst_chars=100, text_chars_per_s=10
        )
        url = ws_url(server.url, VOICE, multi=True)
        with open_socket(url) as ws:
            send(ws, text=" ", context_id="a")
            send(ws, text=" ", context_id="b")
            got = drain(ws, Received(), timeout_s=20)
        assert got.close_code == 1008 and got.errors()[0]["error"]["field"] == "context_id"
        with open_socket(ws_url(server.url, VOICE)) as ws:
            send(ws, text=" ")
            got = drain(ws, Received(), timeout_s=20)  # no text: the inactivity limit
        assert got.close_code == 1008 and got.errors()[0]["error"]["field"] == "inactivity_timeout"
        with open_socket(ws_url(server.url, VOICE)) as ws:
            send(ws, text=" ")
            send(ws, text="word " * 40)
            got = drain(ws, Received(), timeout_s=20)
        assert got.close_code == 1008 and got.errors()[0]["error"]["field"] == "text"


@pytest.mark.timed
@pytest.mark.parametrize("sessions", [2, 4, 8])
def test_concurrent_sessions_all_speak(live_server: Callable[..., Any], sessions: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with live_server() as server:
        with ThreadPoolExecutor(sessions) as pool:
            results = list(
                pool.map(
                    lambda i: speak(
                        server.url,
                        VOICE,
                        [f"Session {i} says ", "hello."],
                        output_format="pcm_16000",
                    ),
                    range(sessions),
                )
            )
        assert server.app.state.runtime.speech_idle()
    for got in results:
        assert got.errors() == [] and got.close_code == 1000
        assert len(got.audio()) / 2 / 16000 > 0.5
        assert "hello" in got.chars()
