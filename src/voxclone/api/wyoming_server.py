"""``voxclone wyoming``: the Wyoming protocol (Home Assistant) in front of the speech service.

Wyoming is a TCP protocol of JSON-headed events. This adapter answers:

* ``describe`` → ``info`` with one TTS program listing the built-in voices
  and the cloned voices of the one owner chosen at start-up (Wyoming has no
  API keys, so a server exposes at most one library, never another's);
* ``synthesize`` → ``audio-start``, ``audio-chunk``\\ s (16-bit mono PCM at the
  default engine's rate), ``audio-stop``;
* ``synthesize-start`` / ``-chunk`` / ``-stop`` → each sentence is spoken as
  soon as it is complete, then ``synthesize-stopped`` (the ``synthesize`` a
  streaming client also sends, for old servers, is ignored meanwhile);
* anything refused → an ``error`` event (``text`` = the message, ``code`` =
  the error's code); the connection stays open for the next request. Every
  event is read and checked with the limits of an HTTP request first
  (api/wyoming_events.py); one that cannot be read on from (a header that is
  not JSON, lengths that are not byte counts) gets its error, then the
  connection closes.

Speech goes through the same path as HTTP streaming: the router's
``admit`` (refuse early when the engine is busy), ``stream`` (validation,
SSML when the text starts with ``<speak>``, cache, cancellation), and the
stream slots that bound concurrent streams. Events are read continuously
while a request speaks, so a client that goes away is noticed at once: its
cancel flag drops the queued engine work and the stream is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeTextFormat,
    SynthesizeVoice,
)

from voxclone.api.streaming import CancelFlag, StreamSlots
from voxclone.api.wyoming_events import EventRefused, check_event, read_event
from voxclone.errors import Cancelled, InvalidInput, PayloadTooLarge, VoxcloneError
from voxclone.service.speech.pricing import released_on_failure
from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.text.segment import split_sentences
from voxclone.synth.text.ssml import looks_like_ssml

if TYPE_CHECKING:
    from voxclone.assembly import Runtime

log = logging.getLogger("voxclone.wyoming")

# The owner that owns nothing: the voice store refuses an empty owner, so no
# stored voice matches it and only the built-in voices are exposed. (None
# would mean "every owner" to the catalog: never passed from here.)
BUILTINS_ONLY = ""
PROGRAM = "voxclone"
HOMEPAGE = "https://github.com/voxclone/voxclone"
SAMPLES_PER_CHUNK = 1024  # ~43 ms at 24 kHz: small events keep playback smooth
# Requests (describe, synthesize, a stream's start) waiting on one connection;
# a client that floods more gets an error event, not an ever-growing queue.
MAX_PENDING = 8
# Unfinished sentence text a stream holds before speaking it anyway: each
# chunk re-splits at most this much, so a long stream costs linear time.
MAX_PENDING_CHARS = 1000
SHUTDOWN_WAIT_S = 10.0  # for streams to stop at their next chunk


@dataclass(frozen=True)
class WyomingConfig:
    owner: str  # whose cloned voices are listed and usable; BUILTINS_ONLY for none
    max_text_chars: int
    request_deadline_s: float
    stream_first_audio_s: float


@dataclass
class _TextStream:
    """One ``synthesize-start`` … ``synthesize-stop`` exchange."""

    voice: SynthesizeVoice | None
    ssml: bool | None
    pending: str = ""  # text received but not yet a complete sentence
    received: int = 0  # characters received in all
    failed: bool = False  # an error was sent: the rest of this stream is dropped
    audio_started: bool = False


@dataclass
class _Job:
    kind: str  # describe | synthesize | start | speak | stop | fail
    stream: _TextStream | None = None
    text: str = ""
    voice: SynthesizeVoice | None = None
    ssml: bool | None = None
    error: VoxcloneError | None = None
    counted: bool = False  # counts against MAX_PENDING


class WyomingTts:
    """What every connection shares: the runtime's speech router and catalog,
    the stream slots and the exposed owner."""

    def __init__(self, runtime: Runtime, config: WyomingConfig, slots: StreamSlots) -> None:
        if not isinstance(config.owner, str):
            raise TypeError("the Wyoming owner is a string (BUILTINS_ONLY for none)")
        self.runtime = runtime
        self.config = config
        self.slots = slots
        self.sample_rate = runtime.speech.sample_rate
        # Connections' worker tasks, awaited at shutdown (a stream mid-chunk
        # finishes its ``finally``: engine work cancelled, slot released).
        self.workers: set[asyncio.Task[None]] = set()
        # The longest event data we read: a request's text as UTF-8 and JSON
        # escapes (up to 6 bytes a character), plus room for the rest.
        self.max_event_bytes = 6 * config.max_text_chars + 64 * 1024

    @classmethod
    def from_runtime(cls, runtime: Runtime, owner: str) -> WyomingTts:
        """Limits from the runtime's settings, as the HTTP app takes them."""
        settings = runtime.settings
        config = WyomingConfig(
            owner=owner,
            max_text_chars=settings.max_text_chars,
            request_deadline_s=settings.request_deadline_s,
            stream_first_audio_s=settings.stream_first_audio_s,
        )
        return cls(runtime, config, StreamSlots(settings.max_concurrent_streams))

    # -- describe -----------------------------------------------------------------
    def info(self) -> Info:
        """Every voice this server speaks for its owner (blocking: reads the library)."""
        from voxclone import __version__

        speech = self.runtime.speech
        engine_languages = {name: list(s.languages) for name, s in speech.services.items()}
        voices: list[TtsVoice] = []
        taken: set[str] = set()
        for item in self.runtime.catalog.listing(owner=self.config.owner):
            # A cloned voice whose name a built-in (or an earlier clone) already
            # answers to is offered by its id, which always selects it.
            name = item.name if item.name not in taken else item.id
            taken.add(name)
            languages = [item.language] if item.language else engine_languages.get(item.engine, [])
            voices.append(
                TtsVoice(
                    name=name,
                    description=item.description or name,
                    attribution=Attribution(name=item.model_id or PROGRAM, url=HOMEPAGE),
                    installed=True,
                    version=None if item.builtin else str(item.version),
                    languages=languages,
                )
            )
        program = TtsProgram(
            name=PROGRAM,
            description="voxclone zero-shot voice-cloning TTS",
            attribution=Attribution(name=PROGRAM, url=HOMEPAGE),
            installed=True,
            version=__version__,
            voices=voices,
            supports_synthesize_streaming=True,
        )
        return Info(tts=[program])

    # -- speech ---------------------------------------------------------------------
    def request(self, text: str, voice: SynthesizeVoice | None, ssml: bool | None) -> SpeechRequest:
        name = voice.name if voice is not None else None
        language = voice.language if voice is not None and name is None else None
        if language:
            language = language.replace("_", "-").lower()  # Home Assistant says en_US
            spoken = self.runtime.speech.languages
            if language not in spoken and language.split("-")[0] in spoken:
                language = language.split("-")[0]  # fr-fr → fr
        return SpeechRequest(
            text=text,
            voice=name,
            language=language,
            format="pcm",
            sample_rate=self.sample_rate,
            owner=self.config.owner,
            ssml=ssml,
        )

    def check_voice(self, voice: SynthesizeVoice | None) -> None:
        """Refuse a stream's unknown voice at its start (blocking: may read the library)."""
        if voice is not None and voice.name:
            self.runtime.catalog.resolve(voice.name, self.config.owner)

    def open(
        self, req: SpeechRequest, flag: CancelFlag
    ) -> tuple[Iterator[bytes], Callable[[], None]]:
        """Admit and start ``req`` like an HTTP stream; returns its PCM bytes and
        the release of its stream slot. Runs in a worker thread (validation may
        load a voice)."""
        release = self.slots.acquire()
        try:
            deadline = time.monotonic() + self.config.request_deadline_s
            # Resolved once: the admission's price and the stream read the same object.
            speech = self.runtime.speech.request(req)
            admission = self.runtime.speech.admit(
                speech, deadline, stream=True, first_audio_s=self.config.stream_first_audio_s
            )
            with released_on_failure(admission):
                _, chunks = self.runtime.speech.stream(
                    speech, cancelled=flag, deadline=deadline, admission=admission
                )
        except BaseException:
            release()
            raise
        return chunks, release


def _ssml_flag(text_format: str | SynthesizeTextFormat | None) -> bool | None:
    """Wyoming's ``text_format``: "ssml" forces SSML; otherwise the product's
    rule applies (SSML when the text starts with ``<speak>``)."""
    if text_format == SynthesizeTextFormat.SSML or text_format == "ssml":
        return True
    return None


class WyomingHandler(AsyncEventHandler):
    """One connection. ``handle_event`` only queues work, so the protocol loop
    keeps reading (and sees a disconnect at once); a worker task speaks."""

    def __init__(
        self, tts: WyomingTts, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        super().__init__(reader, writer)
        self.tts = tts
        self.flag = CancelFlag()  # set when the client goes away
        self.jobs: asyncio.Queue[_Job] = asyncio.Queue()
        self.pending = 0
        self.stream: _TextStream | None = None
        self.worker: asyncio.Task[None] | None = None

    # -- reading side ---------------------------------------------------------------
    async def handle_event(self, event: Event) -> bool:
        try:
            check_event(event, self.tts.config.max_text_chars)
        except VoxcloneError as exc:
            await self._refuse(event, exc)
            return True
        if Describe.is_type(event.type):
            await self._queue(_Job("describe"), count=True)
        elif SynthesizeStart.is_type(event.type):
            start = SynthesizeStart.from_event(event)
            self.stream = _TextStream(start.voice, _ssml_flag(start.text_format))
            await self._queue(_Job("start", self.stream), count=True)
        elif SynthesizeChunk.is_type(event.type):
            if self.stream is not None:
                self._add_text(self.stream, SynthesizeChunk.from_event(event).text)
        elif SynthesizeStop.is_type(event.type):
            if self.stream is not None:
                stream, self.stream = self.stream, None
                self._flush(stream)
                await self._queue(_Job("stop", stream))
        elif Synthesize.is_type(event.type):
            if self.stream is None:  # inside a stream it repeats the chunks (old servers)
                request = Synthesize.from_event(event)
                job = _Job(
                    "synthesize",
                    text=request.text,
                    voice=request.voice,
                    ssml=_ssml_flag(request.text_format),
                )
                await self._queue(job, count=True)
        else:
            log.debug("ignoring Wyoming event %s", event.type)
        return True

    async def _refuse(self, event: Event, error: VoxcloneError) -> None:
        """Answer a refused event in its turn (after the work queued before it).
        A refused stream start or chunk fails its stream: its stop still gets
        synthesize-stopped, and nothing of it is spoken."""
        if SynthesizeStart.is_type(event.type):
            self.stream = _TextStream(None, None, failed=True)
        elif SynthesizeChunk.is_type(event.type) and self.stream is not None:
            if self.stream.failed:
                return  # its error was sent
            self.stream.failed = True
            self.stream.pending = ""
        elif Synthesize.is_type(event.type) and self.stream is not None:
            return  # ignored inside a stream anyway
        await self._queue(_Job("fail", error=error), count=True)

    async def _queue(self, job: _Job, *, count: bool = False) -> None:
        if count:
            if self.pending >= MAX_PENDING:
                await self._send_error(
                    InvalidInput(
                        f"more than {MAX_PENDING} requests are waiting on this connection",
                        limit=MAX_PENDING,
                    )
                )
                return
            self.pending += 1
            job.counted = True
        if self.worker is None:
            self.worker = asyncio.create_task(self._work(), name="voxclone wyoming worker")
            self.tts.workers.add(self.worker)
            self.worker.add_done_callback(self.tts.workers.discard)
        self.jobs.put_nowait(job)

    def _add_text(self, stream: _TextStream, text: str) -> None:
        if stream.failed or not isinstance(text, str):
            return
        stream.received += len(text)
        limit = self.tts.config.max_text_chars
        if stream.received > limit:
            stream.pending = ""
            error = PayloadTooLarge(
                f"text is longer than {limit} characters", field="text", limit=limit
            )
            self.jobs.put_nowait(_Job("fail", stream, error=error))
            stream.failed = True
            return
        stream.pending += text
        if stream.ssml or looks_like_ssml(stream.pending):
            return  # markup is spoken whole at the stop: sentences would cut its tags
        sentences = split_sentences(stream.pending)
        if len(sentences) < 2:
            if len(stream.pending) > MAX_PENDING_CHARS:
                # No end in sight: speak what there is (the frontend still cuts
                # it at clause boundaries), so splitting stays linear in the text.
                self._flush(stream)
            return
        # The last piece may still grow ("Dr." + " Smith"); the others are done.
        for sentence in sentences[:-1]:
            self.jobs.put_nowait(_Job("speak", stream, text=sentence))
        # split_sentences evens out spaces; keep the break that ends the text
        # so the next chunk is not glued to the last word (or line) of this one.
        trailing = stream.pending[len(stream.pending.rstrip()) :]
        stream.pending = sentences[-1] + ("\n" if "\n" in trailing else " " if trailing else "")

    def _flush(self, stream: _TextStream) -> None:
        if not stream.failed and stream.pending.strip():
            self.jobs.put_nowait(_Job("speak", stream, text=stream.pending))
        stream.pending = ""

    async def run(self) -> None:
        """The protocol loop, with bounded reads (the package's reader would
        buffer whatever length a header claims) and malformed events answered
        with an error event instead of ending the connection."""
        try:
            while True:
                try:
                    event = await read_event(self.reader, self.tts.max_event_bytes)
                except EventRefused as refused:
                    if refused.fatal:  # answered now: closing stops the worker
                        await self._send_error(refused.error)
                        break
                    await self._refuse(Event(type=refused.event_type), refused.error)
                    continue
                if event is None:
                    break
                try:
                    await self.handle_event(event)
                except (KeyError, TypeError, ValueError, AttributeError):
                    await self._send_error(
                        InvalidInput(f"malformed '{event.type[:40]}' event", field="event")
                    )
        except (ConnectionError, OSError):
            # A write to a client that already left (broken pipe, reset) fails
            # the next read too: a normal end of a connection, not an error.
            log.debug("Wyoming client connection lost")
        finally:
            await self.disconnect()
            self.writer.close()

    async def disconnect(self) -> None:
        # Called by the protocol loop however the connection ends.
        self.flag.set()
        self.jobs.put_nowait(_Job("closed"))

    # -- speaking side --------------------------------------------------------------
    async def _work(self) -> None:
        while True:
            job = await self.jobs.get()
            if job.counted:
                self.pending -= 1
            if self.flag() or job.kind == "closed":
                return
            try:
                await self._run(job)
            except VoxcloneError as exc:  # e.g. the library's database is unreachable
                await self._send_error(exc)
            except Exception:
                log.exception("Wyoming request failed")
                await self._send_error(VoxcloneError("internal error"))

    async def _run(self, job: _Job) -> None:
        if job.kind == "describe":
            info = await asyncio.to_thread(self.tts.info)
            await self._send(info.event())
        elif job.kind == "synthesize":
            req = self.tts.request(job.text, job.voice, job.ssml)
            if await self._speak(req, start=True):
                await self._send(AudioStop().event())
        elif job.kind == "start":
            assert job.stream is not None
            try:
                await asyncio.to_thread(self.tts.check_voice, job.stream.voice)
            except VoxcloneError as exc:
                job.stream.failed = True
                await self._send_error(exc)
        elif job.kind == "speak":
            stream = job.stream
            assert stream is not None
            if stream.failed:
                return
            req = self.tts.request(job.text, stream.voice, stream.ssml)
            if await self._speak(req, start=not stream.audio_started):
                stream.audio_started = True
            else:
                stream.failed = True
        elif job.kind == "fail":
            assert job.error is not None
            await self._send_error(job.error)
        elif job.kind == "stop":
            stream = job.stream
            assert stream is not None
            if not stream.failed:
                if not stream.audio_started:  # nothing to say: an empty audio stream
                    await self._send(self._audio_start())
                await self._send(AudioStop().event())
            elif stream.audio_started:
                await self._send(AudioStop().event())  # close what the client is playing
            await self._send(SynthesizeStopped().event())

    def _audio_start(self) -> Event:
        return AudioStart(rate=self.tts.sample_rate, width=2, channels=1).event()

    async def _speak(self, req: SpeechRequest, *, start: bool) -> bool:
        """Send ``req``'s audio as audio-chunk events (after an audio-start when
        ``start``); False (and an error event) when it was refused or failed."""
        try:
            chunks, release = await asyncio.to_thread(self.tts.open, req, self.flag)
        except VoxcloneError as exc:
            await self._send_error(exc)
            return False
        carry = b""
        step = SAMPLES_PER_CHUNK * 2
        try:
            if start:
                await self._send(self._audio_start())
            while not self.flag():
                data = await asyncio.to_thread(next, chunks, None)
                if data is None:
                    break
                data = carry + data
                whole = len(data) - len(data) % 2  # whole 16-bit samples only
                carry = data[whole:]
                for at in range(0, whole, step):
                    await self._send(
                        AudioChunk(
                            rate=self.tts.sample_rate,
                            width=2,
                            channels=1,
                            audio=data[at : min(at + step, whole)],
                        ).event()
                    )
        except Cancelled:
            return False
        except VoxcloneError as exc:
            log.warning("Wyoming stream ended early: %s (%s)", exc.code, exc.message)
            await self._send_error(exc)
            return False
        finally:
            # No thread is inside the generator now: closing it runs the
            # service's ``finally`` (queued chunks cancelled, admission freed).
            close = getattr(chunks, "close", None)
            try:
                if close is not None:
                    close()
            except ValueError:  # shutdown cancelled us mid-chunk: its flag stops it
                log.debug("Wyoming stream still running; it stops at its next chunk")
            finally:
                release()
        return not self.flag()

    async def _send(self, event: Event) -> None:
        if self.flag():
            return
        try:
            await self.write_event(event)
        except (ConnectionError, RuntimeError, OSError):
            self.flag.set()  # the client is gone; the reading side will notice too

    async def _send_error(self, exc: VoxcloneError) -> None:
        await self._send(Error(text=exc.message, code=exc.code).event())


async def serve_wyoming(
    tts: WyomingTts,
    uri: str,
    *,
    ready: Callable[[AsyncServer], Any] | None = None,
    zeroconf: str | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Listen on ``uri`` (tcp://host:port, unix://path) until ``stop`` is set,
    SIGTERM arrives or the task is cancelled; ``ready`` is called once listening."""
    server = AsyncServer.from_uri(uri)
    handler = partial(WyomingHandler, tts)
    if zeroconf is not None:
        await _announce(server, zeroconf)
    await server.start(handler)
    if ready is not None:
        ready(server)
    stop = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread (tests)
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()  # every connection's flag is set: its work stops
        if tts.workers:
            await asyncio.wait(set(tts.workers), timeout=SHUTDOWN_WAIT_S)


def check_zeroconf(uri: str) -> None:
    """Refuse ``--zeroconf`` where it cannot work (before any model loads)."""
    if not uri.startswith("tcp://"):
        raise InvalidInput("zeroconf needs a tcp:// URI", field="zeroconf")
    try:
        import zeroconf.asyncio  # noqa: F401  (what wyoming.zeroconf needs)
    except ImportError as exc:
        raise InvalidInput(
            "zeroconf discovery needs the 'zeroconf' package (pip install zeroconf)",
            field="zeroconf",
        ) from exc


async def _announce(server: AsyncServer, name: str) -> None:
    """mDNS discovery for Home Assistant; needs the optional ``zeroconf`` package."""
    from wyoming.server import AsyncTcpServer

    if not isinstance(server, AsyncTcpServer):
        raise InvalidInput("zeroconf needs a tcp:// URI", field="zeroconf")
    from wyoming.zeroconf import HomeAssistantZeroconf

    host = None if server.host in ("0.0.0.0", "::") else server.host
    discovery = HomeAssistantZeroconf(port=server.port, name=name or None, host=host)
    await discovery.register_server()
