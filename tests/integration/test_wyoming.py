"""Wyoming (Home Assistant) over TCP on loopback, spoken to with the ``wyoming``
package's own client: describe, synthesize (listened to by Whisper), the
streaming form, refusals on a connection that stays usable, and a client
that leaves mid-stream.

One in-process server per module on the session's real runtime (no second
model load); ``voxclone wyoming`` itself is started as a process once, in
test_cli_serves_wyoming.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from voxclone.api.wyoming_server import BUILTINS_ONLY, WyomingTts, serve_wyoming
from voxclone.devserver import free_loopback_port
from voxclone.service.speech.service import LOOKAHEAD_CHUNKS
from voxclone.synth.voice.asr import word_error_rate

pytestmark = pytest.mark.models

HOST = "127.0.0.1"
OWNER, OTHER = "wyoming-owner", "wyoming-other"
SENTENCE = "The birch canoe slid on the smooth planks."
READ_TIMEOUT_S = 60.0


def _store_voice(runtime: Any, store: Any, name: str, owner: str) -> str:
    return str(store(runtime, name, owner, builtin="clear_male").id)


class _Server:
    """serve_wyoming on its own event loop in a thread, like the CLI runs it."""

    def __init__(self, tts: WyomingTts) -> None:
        self.port = free_loopback_port()
        self.tts = tts
        self.loop = asyncio.new_event_loop()
        self.listening = threading.Event()
        self.stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._run, name="wyoming-test", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def main() -> None:
            self.stop = asyncio.Event()
            await serve_wyoming(
                self.tts,
                f"tcp://{HOST}:{self.port}",
                ready=lambda _s: self.listening.set(),
                stop=self.stop,
            )

        self.loop.run_until_complete(main())

    def __enter__(self) -> _Server:
        self.thread.start()
        assert self.listening.wait(10), "the Wyoming server did not start"
        return self

    def __exit__(self, *_exc: object) -> None:
        stop = self.stop
        assert stop is not None
        self.loop.call_soon_threadsafe(stop.set)
        self.thread.join(10)


@pytest.fixture(scope="module")
def server(runtime: Any, store_style_voice: Any) -> Iterator[_Server]:
    _store_voice(runtime, store_style_voice, "wyoming_mine", OWNER)
    _store_voice(runtime, store_style_voice, "wyoming_theirs", OTHER)
    with _Server(WyomingTts.from_runtime(runtime, OWNER)) as running:
        yield running


def _client(server: _Server) -> AsyncTcpClient:
    return AsyncTcpClient(HOST, server.port, connect_timeout=5, read_timeout=READ_TIMEOUT_S)


async def _until(client: AsyncTcpClient, *types: str) -> list[Event]:
    """Events up to and including the first of ``types`` (or an error)."""
    seen: list[Event] = []
    while True:
        event = await client.read_event()
        assert event is not None, "the server closed the connection"
        seen.append(event)
        if event.type in types or Error.is_type(event.type):
            return seen


def _pcm(events: list[Event]) -> np.ndarray:
    audio = b"".join(AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type))
    return np.frombuffer(audio, np.int16).astype(np.float32) / 32768.0


def _types(events: list[Event]) -> list[str]:
    return [e.type for e in events if not AudioChunk.is_type(e.type)]


def _request(server: _Server, text: str) -> Any:
    return server.tts.request(text, None, None)


def test_describe_lists_builtins_and_only_the_chosen_owners_voices(
    server: _Server, runtime: Any
) -> None:
    async def describe() -> Info:
        async with _client(server) as client:
            await client.write_event(Describe().event())
            return Info.from_event((await _until(client, "info"))[-1])

    info = asyncio.run(describe())
    (program,) = info.tts
    assert program.supports_synthesize_streaming
    voices = {v.name: v for v in program.voices}
    assert "en-us" in voices["clear_female"].languages
    assert "wyoming_mine" in voices
    assert "wyoming_theirs" not in voices  # another owner's voice is never listed
    # Without an owner: built-ins only, whoever's voices the library holds.
    builtins_only = WyomingTts.from_runtime(runtime, BUILTINS_ONLY).info()
    names = {v.name for v in builtins_only.tts[0].voices}
    assert "clear_female" in names and "wyoming_mine" not in names
    assert set(runtime.catalog.builtin_names) <= names


def test_synthesize_speaks_pcm_that_whisper_understands(server: _Server, transcriber: Any) -> None:
    async def speak() -> list[Event]:
        async with _client(server) as client:
            request = Synthesize(text=SENTENCE, voice=SynthesizeVoice(name="clear_female"))
            await client.write_event(request.event())
            return await _until(client, "audio-stop")

    events = asyncio.run(speak())
    assert _types(events) == ["audio-start", "audio-stop"], _types(events)
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (24_000, 2, 1)
    audio = _pcm(events)
    seconds = audio.size / start.rate
    assert 1.5 < seconds < 6.0, seconds
    heard = transcriber.transcribe(audio, start.rate)
    assert word_error_rate(SENTENCE, heard) <= 0.2, heard


def test_streaming_speaks_each_sentence_as_it_completes(server: _Server) -> None:
    async def stream() -> tuple[list[Event], list[Event]]:
        async with _client(server) as client:
            await client.write_event(
                SynthesizeStart(voice=SynthesizeVoice(name="wyoming_mine")).event()
            )
            for piece in ("The sky is ", "blue today. ", "Birds"):
                await client.write_event(SynthesizeChunk(text=piece).event())
            # The first sentence is spoken before the client says it is done.
            first = await _until(client, "audio-chunk")
            for piece in (" sing in the", " morning."):
                await client.write_event(SynthesizeChunk(text=piece).event())
            # What a streaming client also sends, for servers without streaming.
            full = "The sky is blue today. Birds sing in the morning."
            await client.write_event(Synthesize(text=full).event())
            await client.write_event(SynthesizeStop().event())
            rest = await _until(client, SynthesizeStopped().event().type)
            return first, rest

    first, rest = asyncio.run(stream())
    events = first + rest
    assert _types(events) == ["audio-start", "audio-stop", "synthesize-stopped"], _types(events)
    seconds = _pcm(events).size / 24_000
    # Two short sentences, spoken once each (the repeated synthesize is ignored).
    assert 2.0 < seconds < 7.0, seconds


def test_refusals_are_error_events_and_the_connection_stays_usable(server: _Server) -> None:
    async def exchange() -> list[list[Event]]:
        answers = []
        async with _client(server) as client:
            for voice, text in (
                ("no_such_voice", "Hello."),
                ("wyoming_theirs", "Hello."),  # exists, but another owner's
                ("clear_female", "   "),
                ("clear_female", "x" * (server.tts.config.max_text_chars + 1)),
            ):
                request = Synthesize(text=text, voice=SynthesizeVoice(name=voice))
                await client.write_event(request.event())
                answers.append(await _until(client, "audio-stop"))
            await client.write_event(Event(type="synthesize", data={"voice": {}}))  # no text
            answers.append(await _until(client, "audio-stop"))
            await client.write_event(
                SynthesizeStart(voice=SynthesizeVoice(name="no_such_voice")).event()
            )
            await client.write_event(SynthesizeChunk(text="Hello there. And").event())
            await client.write_event(SynthesizeStop().event())
            answers.append(await _until(client, "synthesize-stopped"))
            answers.append(await _until(client, "synthesize-stopped"))
            await client.write_event(Synthesize(text="Hi.").event())
            answers.append(await _until(client, "audio-stop"))
        return answers

    *refused, stream_error, stream_end, spoken = asyncio.run(exchange())
    codes = [Error.from_event(a[-1]).code for a in refused]
    expected = ["not_found", "not_found", "invalid_input", "payload_too_large", "invalid_input"]
    assert codes == expected, codes
    assert "no_such_voice" in Error.from_event(refused[0][-1]).text
    assert [e.type for e in stream_error] == ["error"]
    assert _types(stream_end) == ["synthesize-stopped"]  # nothing spoken for it
    assert _types(spoken) == ["audio-start", "audio-stop"] and _pcm(spoken).size > 0


def test_client_leaving_mid_stream_stops_the_engine_work(server: _Server, runtime: Any) -> None:
    text = " ".join(f"Here is line {n}." for n in range(1, 41))
    _, planned = runtime.speech.plan(_request(server, text), fast_start=True)
    chunks = len(list(planned))
    scheduler = runtime.scheduler
    before = scheduler.stats()

    async def leave_after_first_audio() -> None:
        client = _client(server)
        await client.connect()
        await client.write_event(Synthesize(text=text).event())
        await _until(client, "audio-chunk")
        await client.disconnect()

    asyncio.run(leave_after_first_audio())
    # The chunks in the engine when the client left finish (seconds on a
    # busy machine); nothing else may start.
    deadline = time.monotonic() + 60
    while True:
        stats = scheduler.stats()
        if stats.queued == 0 and stats.in_flight == 0 and stats.reserved_chars == 0:
            break
        assert time.monotonic() < deadline, stats
        time.sleep(0.05)
    time.sleep(0.5)  # nothing new starts afterwards
    after = scheduler.stats()
    assert (after.completed, after.in_flight) == (stats.completed, 0)
    # The first chunk and at most the look-ahead behind it were rendered.
    rendered = after.completed - before.completed
    assert chunks >= 6 and rendered <= 1 + LOOKAHEAD_CHUNKS, (rendered, chunks)


def test_cli_serves_wyoming_on_the_given_address_until_sigterm(tmp_path: Path) -> None:
    port = free_loopback_port()
    # One ONNX session to warm, not two: the process is ready sooner.
    env = {**os.environ, "VOXCLONE_HOME": str(tmp_path), "VOXCLONE_FAST_LANE_THREADS": "0"}
    command = [sys.executable, "-m", "voxclone.api.cli", "wyoming"]
    proc = subprocess.Popen(
        [*command, "--uri", f"tcp://{HOST}:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once listening (models loaded)
        assert f"listening on tcp://{HOST}:{port} (built-in voices only)" in line, line

        listening = [
            c.laddr
            for c in psutil.Process(proc.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert [(a.ip, a.port) for a in listening] == [(HOST, port)]

        async def describe() -> Info:
            async with AsyncTcpClient(HOST, port, connect_timeout=5, read_timeout=30) as client:
                await client.write_event(Describe().event())
                return Info.from_event((await _until(client, "info"))[-1])

        names = {v.name for v in asyncio.run(describe()).tts[0].voices}
        assert "clear_female" in names
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        # -6 (SIGABRT) once in session 25's CI, not reproduced in 3 runs: the
        # server's own last words say where, next time.
        assert code == 0, (code, proc.stderr.read()[-3000:] if proc.stderr else "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
