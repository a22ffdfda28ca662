"""A voice agent's session: text arriving piece by piece, spoken clause by clause.

Transport-free (api/routes_realtime.py speaks the WebSocket protocol): the
session gets text, flushes and closes per context and hands each message to
``send``. Each context owns a :class:`ClauseBuffer`, one output encoder and
one task that speaks its clauses in order. A clause goes through the speech
service's streaming path with word times (``stream_captioned``): the same
admission, scheduler and tenant turns as an HTTP stream, so sessions share
the engine fairly with HTTP speech. A worker thread is held only while a
clause renders; a session waiting for text holds none.

Barge-in (``close_context``): the context is marked closed first, so nothing
more is sent for it from that instant; its cancel flag stops the scheduler's
queued chunks for it, and the scheduler's cancel watcher cuts the chunk
inside the engine (runtime/scheduler/workers.py): engine idle 12 ms after
close_context at load 12, was 7.9-12.8 s while that chunk ran to its end.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import numpy as np

from voxclone.errors import Cancelled, InvalidInput, VoxcloneError
from voxclone.runtime.admission import AdmissionTerms
from voxclone.service.realtime_audio import (
    AudioOut,
    OutputFormat,
    char_alignment,
    open_output_encoder,
)
from voxclone.service.realtime_text import DEFAULT_SCHEDULE, ClauseBuffer
from voxclone.service.speech.request import SpeechRequest
from voxclone.service.speech.router import SpeechRouter
from voxclone.synth.controls import SpeechControls
from voxclone.synth.text.wordtimes import WordTime

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class RealtimeLimits:
    """A session's bounds; each refusal names its field and limit."""

    max_session_s: float = 1800.0
    # ElevenLabs' defaults: 20 s without text closes the socket; at most 180.
    inactivity_timeout_s: float = 20.0
    max_inactivity_timeout_s: float = 180.0
    # Text without a clause end is spoken after this pause (an LLM that
    # stopped mid-sentence); 0.5 s is ~15 tokens at 30 tokens/s.
    idle_flush_s: float = 0.5
    max_contexts: int = 5  # ElevenLabs' multi-stream-input allows 5 per socket
    max_message_chars: int = 10_000
    # Text rate: a bucket of this many characters refilled at the rate below
    # (an LLM writes ~100 characters/s; 10x that is no agent).
    text_burst_chars: int = 20_000
    text_chars_per_s: float = 1_000.0
    first_message_timeout_s: float = 10.0
    # How long a clause's render may wait for the engine before it is refused.
    clause_deadline_s: float = 30.0


@dataclass(frozen=True)
class Voice:
    """What every clause of a session is spoken with."""

    voice: str
    owner: str
    model: str | None = None
    language: str | None = None
    speed: float | None = None
    unmarked: bool = False  # the caller's key is waived (SpeechRequest.unmarked)


@dataclass
class SessionStats:
    """What a session measured: first audio after each clause became ready
    (seconds), cancelled contexts, and when their engine work stopped."""

    first_audio_s: list[float] = field(default_factory=list)
    cancelled: int = 0
    cancel_to_stop_s: list[float] = field(default_factory=list)


class TextRate:
    """A token bucket over characters of text."""

    def __init__(self, limits: RealtimeLimits) -> None:
        self._limits = limits
        self._level = float(limits.text_burst_chars)
        self._at = time.monotonic()

    def take(self, chars: int) -> None:
        now = time.monotonic()
        lim = self._limits
        self._level = min(
            lim.text_burst_chars, self._level + (now - self._at) * lim.text_chars_per_s
        )
        self._at = now
        if chars > self._level:
            raise InvalidInput(
                f"text arrives faster than {lim.text_chars_per_s:.0f} characters/s "
                f"(bursts of {lim.text_burst_chars})",
                field="text",
                limit=lim.text_chars_per_s,
            )
        self._level -= chars


class _Gone(Exception):
    """Sending failed: the socket is closed."""


class _Context:
    def __init__(self, context_id: str, schedule: Sequence[int], encoder: AudioOut) -> None:
        self.id = context_id
        self.buffer = ClauseBuffer(schedule)
        self.encoder = encoder
        # (text, when it was complete, whether it is the head)
        self.clauses: asyncio.Queue[tuple[str, float, bool] | None] = asyncio.Queue()
        self.cancel = threading.Event()
        self.closed = False  # close_context: nothing more is sent
        self.ended = False  # no more text will come
        self.task: asyncio.Task[None] | None = None
        self.idle: asyncio.TimerHandle | None = None
        # The clause renders still pumping audio (at most two: the clause being
        # sent and the next one, started ahead): a barge-in waits for them.
        self.renders: set[asyncio.Future[None]] = set()
        # When the client's audio runs out if it plays what it got in real time.
        self.played_until = 0.0

    async def renders_stopped(self) -> None:
        while self.renders:
            await asyncio.wait(set(self.renders))


_Part = tuple[np.ndarray, list[WordTime]]

# A clause whose listener has less audio than this left to play gets a short
# first chunk (3 words, ~0.4 s to render on an idle 2-core host); with more,
# it renders whole sentences: a sentence's render (~0.4 s per second of its
# audio) then fits inside what is still playing.
FAST_START_BELOW_S = 1.0


@dataclass
class _ClauseRender:
    """One clause's render: its parts as they come, and when it first had audio."""

    ready_at: float  # when the clause's text was complete (perf_counter)
    parts: asyncio.Queue[_Part | None]
    pumped: asyncio.Future[None]  # the worker thread that hands the parts over
    head: bool = False  # a first clause's first words (realtime_text.py)
    first_part: asyncio.Event = field(default_factory=asyncio.Event)

    async def started_speaking(self) -> None:
        """Until its first part arrived or its render ended (it may have none)."""
        first: asyncio.Future[Any] = asyncio.ensure_future(self.first_part.wait())
        either: list[asyncio.Future[Any]] = [first, self.pumped]
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            first.cancel()


class RealtimeSession:
    """One WebSocket's contexts (a stream-input socket has one)."""

    def __init__(
        self,
        speech: SpeechRouter,
        voice: Voice,
        output: OutputFormat,
        send: Send,
        *,
        limits: RealtimeLimits | None = None,
        schedule: Sequence[int] = DEFAULT_SCHEDULE,
        multi: bool = False,
    ) -> None:
        self._speech = speech
        self._voice = voice
        self._output = output
        self._send = send
        self.limits = limits or RealtimeLimits()
        self._schedule = tuple(schedule)
        self._multi = multi
        self._contexts: dict[str, _Context] = {}
        self._rate = TextRate(self.limits)
        self._send_lock = asyncio.Lock()
        self.stats = SessionStats()
        self._failure: VoxcloneError | None = None
        # One listener hears every context of a socket (the scheduler's lane).
        self._listener = uuid.uuid4().hex

    @property
    def failure(self) -> VoxcloneError | None:
        """The error that ended a context's render (sent, then the socket closes)."""
        return self._failure

    # -- requests --------------------------------------------------------------
    def request(self, text: str) -> SpeechRequest:
        v = self._voice
        return SpeechRequest(
            text=text,
            voice=v.voice,
            model=v.model,
            language=v.language,
            controls=SpeechControls(speed=v.speed),
            format="pcm",
            sample_rate=self._speech.sample_rate,
            owner=v.owner,
            ssml=False,
            unmarked=v.unmarked,
        )

    def check_voice(self) -> None:
        """Resolve the voice once before any text (a 4xx now, not mid-session);
        voice lookup may read the store: call from a worker thread."""
        self._speech.resolve(self.request("Hello."))

    # -- the protocol's operations ---------------------------------------------
    def context(self, context_id: str) -> _Context:
        ctx = self._contexts.get(context_id)
        if ctx is not None:
            return ctx
        live = sum(1 for c in self._contexts.values() if not c.closed and not c.ended)
        if live >= self.limits.max_contexts:
            raise InvalidInput(
                f"at most {self.limits.max_contexts} open contexts per socket; "
                "close one with close_context first",
                field="context_id",
                limit=self.limits.max_contexts,
            )
        encoder = open_output_encoder(self._output, self._speech.sample_rate)
        ctx = _Context(context_id, self._schedule, encoder)
        ctx.task = asyncio.create_task(self._speak(ctx), name=f"realtime-{context_id[:32]}")
        self._contexts[context_id] = ctx
        return ctx

    def has_context(self, context_id: str) -> bool:
        return context_id in self._contexts

    def text(self, context_id: str, text: str, *, flush: bool = False) -> None:
        if len(text) > self.limits.max_message_chars:
            raise InvalidInput(
                f"a text message holds at most {self.limits.max_message_chars} characters",
                field="text",
                limit=self.limits.max_message_chars,
            )
        self._rate.take(len(text))
        ctx = self.context(context_id)
        if ctx.closed or ctx.ended:
            return  # text for a closed context is dropped, as the protocol does
        now = time.perf_counter()
        for clause in ctx.buffer.add(text):
            ctx.clauses.put_nowait((clause, now, ctx.buffer.is_head(clause)))
        if flush:
            self.flush(context_id)
        else:
            self._arm_idle(ctx)

    def flush(self, context_id: str) -> None:
        ctx = self._contexts.get(context_id)
        if ctx is None or ctx.closed:
            return
        now = time.perf_counter()
        for clause in ctx.buffer.flush():
            ctx.clauses.put_nowait((clause, now, False))

    async def close_context(self, context_id: str) -> None:
        """Barge-in: send nothing more for the context, stop its engine work,
        then acknowledge with its ``isFinal``."""
        ctx = self._contexts.get(context_id)
        if ctx is None or ctx.closed:
            return
        asked = time.perf_counter()
        ctx.closed = True
        ctx.cancel.set()
        if ctx.idle is not None:
            ctx.idle.cancel()
        ctx.clauses.put_nowait(None)
        self.stats.cancelled += 1
        await self._emit({"isFinal": True}, ctx, force=True)
        await ctx.renders_stopped()
        self.stats.cancel_to_stop_s.append(time.perf_counter() - asked)

    async def end(self, context_id: str | None = None) -> None:
        """No more text (for one context, or all): speak what is left, then
        send each context's last audio and its ``isFinal``."""
        targets = [self._contexts[context_id]] if context_id in self._contexts else []
        if context_id is None:
            targets = list(self._contexts.values())
        for ctx in targets:
            if ctx.closed or ctx.ended:
                continue
            self.flush(ctx.id)
            ctx.ended = True
            ctx.clauses.put_nowait(None)
        for ctx in targets:
            if ctx.task is not None:
                await asyncio.shield(ctx.task)

    async def close(self) -> None:
        """The socket is gone: stop every context's work at once."""
        for ctx in self._contexts.values():
            ctx.closed = True
            ctx.cancel.set()
            if ctx.idle is not None:
                ctx.idle.cancel()
            ctx.clauses.put_nowait(None)
        for ctx in self._contexts.values():
            if ctx.task is not None:
                await asyncio.gather(ctx.task, return_exceptions=True)
        # Its last clause's end no longer keeps others' first chunks off the
        # all-cores lane: a closed socket says no next clause is coming.
        self._speech.listener_gone(self._listener)

    # -- inside -----------------------------------------------------------------
    def _arm_idle(self, ctx: _Context) -> None:
        if ctx.idle is not None:
            ctx.idle.cancel()
        if ctx.buffer.pending and self.limits.idle_flush_s > 0:
            loop = asyncio.get_running_loop()
            ctx.idle = loop.call_later(self.limits.idle_flush_s, self.flush, ctx.id)

    async def _emit(self, message: dict[str, Any], ctx: _Context, *, force: bool = False) -> None:
        if ctx.closed and not force:
            return
        if self._multi:
            message["contextId"] = ctx.id
        try:
            async with self._send_lock:
                await self._send(message)
        except Exception:
            # The client has gone: stop this context's engine work at once
            # rather than render audio nobody reads.
            ctx.closed = True
            ctx.cancel.set()
            raise _Gone from None

    async def _speak(self, ctx: _Context) -> None:
        """Speak the context's clauses in order. The next clause's render
        starts as soon as the current one has its first audio, not when it
        has finished: rendered one after the other, each clause's first
        render (~0.4 s on an idle 2-core host) was a gap in the playback
        (bench/realtime.py's underruns at one session)."""
        ahead: asyncio.Task[_ClauseRender | None] | None = None
        try:
            current = await self._next_clause(ctx, None)
            while current is not None:
                ahead = asyncio.create_task(self._next_clause(ctx, current))
                await self._send_clause(ctx, current)
                current = await ahead
                ahead = None
            if not ctx.closed:
                tail = ctx.encoder.finish()
                if tail:
                    await self._emit(_audio_message(tail, None), ctx)
                await self._emit({"isFinal": True}, ctx)
        except _Gone:
            pass
        except VoxcloneError as exc:
            if not ctx.closed:
                self._failure = exc
                await self._emit({"message": exc.message, **exc.to_body()}, ctx)
        finally:
            if ahead is not None:  # a failure or a gone client: stop the clause started ahead
                ctx.cancel.set()
                ahead.cancel()  # it may be waiting for text that will never come
                await asyncio.gather(ahead, return_exceptions=True)
                await ctx.renders_stopped()
            ctx.encoder.close()

    async def _next_clause(
        self, ctx: _Context, previous: _ClauseRender | None
    ) -> _ClauseRender | None:
        """The next clause's render, started once ``previous`` has begun
        speaking (so it never delays that clause's first audio); None at the
        end of the context's text or once it is closed."""
        item = await ctx.clauses.get()
        if item is None or ctx.closed:
            return None
        if previous is not None:
            await previous.started_speaking()
            if ctx.closed:
                return None
        # A short first chunk only where the listener would wait for it: the
        # context's first clause, or one after a pause that let its audio run
        # out. Cut short behind audio still playing, the rest of the sentence
        # had to render within the 3 words' ~0.8 s: an underrun in most
        # sentences (bench/realtime.py, 2 per session at 1 session).
        # The clause after the head (a first clause's first words,
        # service/realtime_text.py) also starts short: rendered whole behind
        # a three-word head's ~0.8 s of audio, the rest of the sentence came
        # 0.5 s after the head had played out (2026-12-06, one session). Not after
        # any short clause: "number 4." then "It looks fine today, and ..."
        # cut 3 words off a long sentence whose rest came late.
        fast_start = (
            previous is None
            or previous.head
            or (
                previous.pumped.done()
                and ctx.played_until - time.perf_counter() < FAST_START_BELOW_S
            )
        )
        clause, ready_at, head = item
        speech = self._speech
        req = speech.request(self.request(clause))
        deadline = time.monotonic() + self.limits.clause_deadline_s
        # A clause whose previous one is still rendering its later chunks
        # waits behind them (and behind other sessions' queued chunks) unless
        # the listener waits for it: jumping the queue, two sessions' next
        # sentences went ahead of their own clauses' tails (a 5 s stall). With
        # nothing of its own left to render it jumps, and on an idle server
        # takes the all-cores fast lane: without, one session's last sentence
        # came 0.8 s later (bench/realtime.py, 2026-12-06).
        queue_first = fast_start or previous is None or previous.pumped.done()
        terms = AdmissionTerms(
            deadline,
            must_finish=False,
            first_audio_s=None,
            queue_first=queue_first,
            listener=self._listener,
        )
        loop = asyncio.get_running_loop()
        parts: asyncio.Queue[_Part | None] = asyncio.Queue()

        def put(item: _Part | None) -> None:
            loop.call_soon_threadsafe(parts.put_nowait, item)

        with speech.admission(req, terms, stream=True) as checked:
            _, rendered = await anyio.to_thread.run_sync(
                lambda: speech.stream_captioned(
                    req,
                    cancelled=ctx.cancel.is_set,
                    deadline=deadline,
                    admission=checked,
                    fast_start=fast_start,
                )
            )
        pumped = loop.run_in_executor(None, _pump, rendered, ctx.cancel, put)
        ctx.renders.add(pumped)
        pumped.add_done_callback(ctx.renders.discard)
        return _ClauseRender(ready_at, parts, pumped, head=head)

    async def _send_clause(self, ctx: _Context, clause: _ClauseRender) -> None:
        speech = self._speech
        offset_s = 0.0
        first = True
        while (item := await clause.parts.get()) is not None:
            clause.first_part.set()
            audio, words = item
            if ctx.closed:
                continue  # barge-in: drain what the render still hands over, send nothing
            data = ctx.encoder.feed(audio)
            alignment = char_alignment(words, offset_s)
            offset_s += audio.size / speech.sample_rate
            if not data and alignment is None:
                continue
            if first and data:
                first = False
                self.stats.first_audio_s.append(time.perf_counter() - clause.ready_at)
            await self._emit(_audio_message(data, alignment), ctx)
            seconds = audio.size / speech.sample_rate
            ctx.played_until = max(ctx.played_until, time.perf_counter()) + seconds
        await clause.pumped  # re-raises a render's failure (not a cancel)


def _pump(
    parts: Iterator[tuple[bytes, list[WordTime]]],
    cancel: threading.Event,
    put: Callable[[_Part | None], None],
) -> None:
    """In a worker thread: the clause's PCM parts (int16 at the engine rate)
    as float audio, until the end or a cancel."""
    try:
        for data, words in parts:
            if cancel.is_set():
                break
            audio = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
            put((audio, list(words)))
    except Cancelled:
        pass
    finally:
        close = getattr(parts, "close", None)
        if close is not None:
            close()  # drops the scheduler's queued chunks, frees the admission
        put(None)


def _audio_message(data: bytes, alignment: dict[str, list[object]] | None) -> dict[str, Any]:
    return {
        "audio": base64.b64encode(data).decode("ascii"),
        "isFinal": None,
        "normalizedAlignment": alignment,
        "alignment": alignment,
    }
