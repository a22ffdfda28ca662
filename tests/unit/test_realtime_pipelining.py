"""A voice-agent session starts the next clause's render while the current
clause is still being rendered (issue 48: rendered one after the other, each
clause's first render was a gap in the playback).

The speech router here is a stand-in that records when each clause's render
starts and lets the first clause finish only once the second has started:
a session that renders clauses one after the other never starts the second,
and the test times out. No engine, no socket: the session's own scheduling.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from voxclone.service.realtime_audio import parse_output_format
from voxclone.service.realtime_session import RealtimeSession, Voice
from voxclone.service.speech.request import SpeechRequest

RATE = 24_000
PART = (np.zeros(RATE // 10, dtype="<i2")).tobytes()  # 0.1 s of PCM


class _Resolved:
    def __init__(self, request: SpeechRequest) -> None:
        self.request = request

    def resolve(self) -> None:
        return None


class OverlapRouter:
    """Clause renders that each hand over one part, then hold the rest until
    ``release`` is set (the first clause: until the second render began)."""

    sample_rate = RATE

    def __init__(self, *, hold_first: bool = True) -> None:
        self.hold_first = hold_first
        self.started: list[str] = []
        self.fast_starts: list[bool] = []
        self.second_started = threading.Event()
        self.cancelled_at_end: list[bool] = []

    def request(self, req: SpeechRequest) -> _Resolved:
        return _Resolved(req)

    @contextmanager
    def admission(self, req: Any, terms: Any, *, stream: bool) -> Iterator[None]:
        yield None

    def stream_captioned(
        self,
        req: _Resolved,
        *,
        cancelled: Any,
        deadline: float,
        admission: Any,
        fast_start: bool = True,
    ) -> tuple[None, Iterator[tuple[bytes, list[Any]]]]:
        text = req.request.text
        self.started.append(text)
        self.fast_starts.append(fast_start)
        if len(self.started) == 2:
            self.second_started.set()
        first_clause = len(self.started) == 1 and self.hold_first

        def parts() -> Iterator[tuple[bytes, list[Any]]]:
            yield PART, []
            if first_clause:  # the rest of clause 1 waits for clause 2's render to begin
                assert self.second_started.wait(timeout=5), "clause 2 never started early"
            yield PART, []

        return None, parts()


TWO_CLAUSES = "The first clause is here. The second one follows it. "


def _session(router: OverlapRouter, sent: list[dict[str, Any]]) -> RealtimeSession:
    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    return RealtimeSession(
        router,  # type: ignore[arg-type]
        Voice(voice="clear_female", owner="local"),
        parse_output_format("pcm_24000"),
        send,
    )


def test_the_next_clause_renders_while_the_current_one_is_still_rendering() -> None:
    router = OverlapRouter()
    sent: list[dict[str, Any]] = []

    async def session() -> None:
        talk = _session(router, sent)
        talk.text("", TWO_CLAUSES, flush=True)
        await asyncio.wait_for(talk.end(), timeout=10)

    asyncio.run(session())
    assert router.started == ["The first clause is here.", "The second one follows it."]
    # Only the first clause is cut short for its first audio: the second
    # renders behind audio still playing, as whole sentences.
    assert router.fast_starts == [True, False]
    audio = [m for m in sent if m.get("audio")]
    assert len(audio) == 4  # both clauses' two parts, in order
    assert sent[-1] == {"isFinal": True}


def test_a_barge_in_stops_the_clause_started_ahead_too() -> None:
    router = OverlapRouter()
    sent: list[dict[str, Any]] = []

    async def session() -> None:
        talk = _session(router, sent)
        talk.text("", TWO_CLAUSES, flush=True)
        while not router.second_started.is_set():
            await asyncio.sleep(0.01)
        await asyncio.wait_for(talk.close_context(""), timeout=5)
        assert all(f.done() for f in talk.context("").renders), "a render outlived the barge-in"

    asyncio.run(session())
    assert sent[-1] == {"isFinal": True}


def test_after_a_pause_that_let_the_audio_run_out_the_next_clause_starts_fast() -> None:
    """An agent that stops to think (a tool call) and goes on: its listener
    hears nothing, so the next clause's first chunk is cut short again."""
    router = OverlapRouter(hold_first=False)
    sent: list[dict[str, Any]] = []

    async def session() -> None:
        talk = _session(router, sent)
        talk.text("", "Let me look that up. ", flush=True)
        while len([m for m in sent if m.get("audio")]) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # its 0.2 s of audio has played out
        talk.text("", "Here it is. ", flush=True)
        await asyncio.wait_for(talk.end(), timeout=10)

    asyncio.run(session())
    assert router.fast_starts == [True, True]


def test_the_first_words_go_ahead_and_what_follows_them_starts_short() -> None:
    """An LLM's first clause arrives token by token: its first two words
    are rendered before the clause ends, and the rest, which has only their
    ~0.6 s of audio to hide behind, starts with a short chunk too."""
    router = OverlapRouter()
    sent: list[dict[str, Any]] = []

    async def session() -> None:
        talk = _session(router, sent)
        for piece in ("Sure, I ", "checked the ", "weather for you today. "):
            talk.text("", piece)
            await asyncio.sleep(0.05)
        await asyncio.wait_for(talk.end(), timeout=10)

    asyncio.run(session())
    assert router.started == ["Sure, I", "checked the weather for you today."]
    assert router.fast_starts == [True, True]
