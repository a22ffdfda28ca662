"""``voxclone say --stream-in``: speak standard input while it is still being written.

``llm | voxclone say --stream-in -o - --raw | aplay -r 24000 -f S16_LE -c 1 -t raw``:
text is read as the pipe hands it over (not line by line), cut into clauses
and spoken as each clause ends; audio is written as it comes.

Through a running server (``--server``, or the configured local one when it
answers): its ``stream-input`` WebSocket, the protocol voice agents speak
(api/routes_realtime.py). Without one (``--local``, or no server answers,
said on stderr): the same :class:`~voxclone.service.realtime_session.RealtimeSession`
in this process, once the models have loaded.

Output: WAV (the default; a file's sizes are fixed at the end, ``-o -``
keeps the streamed WAV's open-ended sizes), raw 16-bit PCM (``--raw``,
``.pcm``) at ``--rate``, or MP3 (44.1 kHz). Other formats are refused
(field ``format``): the protocol carries only these.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import codecs
import json
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from voxclone.api.cli_output import AudioSink, audio_format
from voxclone.api.cli_remote import API_KEY_ENV, RemoteError, ServerUnreachable, call_json
from voxclone.config import Settings
from voxclone.errors import InvalidInput
from voxclone.runtime.key_scopes import LOCAL_OWNER

# One read of standard input: whatever the pipe holds, up to this many bytes.
READ_BYTES = 4096
# The server's text rate allows bursts of 20,000 characters, then 1,000/s
# (service/realtime_session.py RealtimeLimits): a file piped in at once is
# paced just under that instead of being refused.
PACE_BURST_CHARS = 16_000
PACE_CHARS_PER_S = 900.0
WAV_HEADER_BYTES = 44
_UNKNOWN = 0xFFFFFFFF


def check_args(args: argparse.Namespace) -> None:
    """What a stream-input session cannot do is refused before any text is read."""
    defaults = {"emotion": "neutral", "intensity": 1.0}  # the parser's own defaults
    for flag in ("pitch", "energy", "emotion", "intensity", "subtitles"):
        if getattr(args, flag, None) not in (None, defaults.get(flag)):
            raise InvalidInput(
                f"--stream-in speaks with --voice, --model, --language and --speed only, "
                f"not --{flag}",
                field=flag,
            )
    if args.ssml:
        raise InvalidInput("--stream-in reads plain text, not SSML", field="ssml")
    if args.text not in (None, "-"):
        raise InvalidInput("--stream-in reads standard input: give no text (or -)", field="text")
    output_format(args)


def output_format(args: argparse.Namespace) -> tuple[str, str]:
    """(what is written: wav, pcm or mp3; the protocol's output_format)."""
    fmt = audio_format(args.output, args.format, args.raw)
    if fmt in ("wav", "pcm"):
        from voxclone.service.realtime_audio import PCM_RATES

        if args.rate not in PCM_RATES:
            raise InvalidInput(
                f"--stream-in writes PCM at {', '.join(map(str, PCM_RATES))} Hz, not {args.rate}",
                field="rate",
                limit=list(PCM_RATES),
                value=args.rate,
            )
        return fmt, f"pcm_{args.rate}"
    if fmt == "mp3":
        return fmt, "mp3_44100_128"
    raise InvalidInput(
        f"--stream-in writes wav, pcm (--raw) or mp3, not {fmt}",
        field="format",
        limit=["wav", "pcm", "mp3"],
    )


def stdin_pieces(fd: int) -> Iterator[str]:
    """Text from ``fd`` as it arrives (a multi-byte character split between
    reads is kept for the next one)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while data := os.read(fd, READ_BYTES):
        if text := decoder.decode(data):
            yield text
    if tail := decoder.decode(b"", final=True):
        yield tail


class Pacer:
    """Keeps text within the server's rate (a token bucket over characters)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._level = float(PACE_BURST_CHARS)
        self._at = clock()

    def wait_s(self, chars: int) -> float:
        """Seconds to wait before ``chars`` more may go; takes them."""
        now = self._clock()
        self._level = min(PACE_BURST_CHARS, self._level + (now - self._at) * PACE_CHARS_PER_S)
        self._at = now
        self._level -= chars
        return max(0.0, -self._level / PACE_CHARS_PER_S)


def paced(pieces: Iterator[str]) -> Iterator[str]:
    pacer = Pacer()
    for piece in pieces:
        time.sleep(pacer.wait_s(len(piece)))
        yield piece


class AudioWriter:
    """Writes audio into the sink as it arrives: a WAV header first (open-ended
    sizes, fixed at the end where the file can seek), flushed per piece so a
    player downstream of ``-o -`` hears it at once."""

    def __init__(self, out: BinaryIO, fmt: str, rate: int) -> None:
        self._out = out
        self._fmt = fmt
        self.bytes = 0
        if fmt == "wav":
            out.write(_wav_header(rate))
            out.flush()

    def write(self, data: bytes) -> None:
        if not data:
            return
        self._out.write(data)
        self._out.flush()
        self.bytes += len(data)

    def finish(self) -> None:
        if self._fmt != "wav" or not self._out.seekable():
            return
        self._out.seek(4)
        self._out.write(struct.pack("<I", WAV_HEADER_BYTES - 8 + self.bytes))
        self._out.seek(40)
        self._out.write(struct.pack("<I", self.bytes))
        self._out.flush()


def _wav_header(rate: int) -> bytes:
    return (
        b"RIFF"
        + struct.pack("<I", _UNKNOWN)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", _UNKNOWN)
    )


def say_stream_in(
    args: argparse.Namespace, settings: Settings, url: str | None, sink: AudioSink
) -> int:
    """Speak standard input into ``sink``: through ``url``'s WebSocket, or in
    this process when ``url`` is None."""
    fmt, protocol_format = output_format(args)
    with sink.opened() as out:
        writer = AudioWriter(out, fmt, args.rate)
        pieces = stdin_pieces(sys.stdin.fileno())
        if url is not None:
            where = url
            _through_server(args, url, protocol_format, pieces, writer)
        else:
            where = "this process"
            asyncio.run(_in_process(args, settings, protocol_format, pieces, writer))
        writer.finish()
    print(
        f"wrote {sink.shown} ({writer.bytes} bytes of {fmt} audio, streamed through {where})",
        file=sys.stderr,
    )
    return 0


# -- through a server -------------------------------------------------------------


def _ws_url(url: str, voice: str, protocol_format: str, args: argparse.Namespace) -> str:
    from urllib.parse import quote, urlencode

    base = url.rstrip("/")
    if base.startswith("https://"):
        base = "wss://" + base[len("https://") :]
    elif base.startswith("http://"):
        base = "ws://" + base[len("http://") :]
    query = {"output_format": protocol_format}
    if args.model:
        query["model_id"] = args.model
    if args.language:
        query["language_code"] = args.language
    return f"{base}/v1/text-to-speech/{quote(voice, safe='')}/stream-input?{urlencode(query)}"


def _server_voice(args: argparse.Namespace, url: str) -> str:
    """--voice, else the server's default (for --language if it has one)."""
    if args.voice:
        return str(args.voice)
    info = call_json(url, "GET", "/v1/info")
    by_language = info.get("default_voices_by_language") or {}
    return str(by_language.get(args.language) or info["default_voice"])


def _first_message(args: argparse.Namespace) -> dict[str, Any]:
    first: dict[str, Any] = {"text": " "}
    if args.speed is not None:
        first["voice_settings"] = {"speed": args.speed}
    return first


def _through_server(
    args: argparse.Namespace,
    url: str,
    protocol_format: str,
    pieces: Iterator[str],
    writer: AudioWriter,
) -> None:
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.sync.client import connect

    voice = _server_voice(args, url)
    key = os.environ.get(API_KEY_ENV)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    target = _ws_url(url, voice, protocol_format, args)
    try:
        ws = connect(target, additional_headers=headers, open_timeout=10, max_size=None)
    except InvalidStatus as exc:
        raise RemoteError(
            f"{url} refused the stream-input WebSocket ({exc.response.status_code})",
            exc.response.status_code,
        ) from None
    except OSError as exc:
        raise ServerUnreachable(
            f"no voxclone server answers at {url} ({exc}); is it running (voxclone serve)?", 503
        ) from None
    failed: list[BaseException] = []

    def feed() -> None:
        # Its own thread: stdin blocks while the writer of the pipe thinks.
        try:
            ws.send(json.dumps(_first_message(args)))
            for piece in paced(pieces):
                ws.send(json.dumps({"text": piece, "try_trigger_generation": True}))
            ws.send(json.dumps({"text": ""}))
        except ConnectionClosed:
            pass  # the server closed first: its message says why
        except BaseException as exc:  # stdin unreadable: report it, close the socket
            failed.append(exc)
            ws.close()

    sender = threading.Thread(target=feed, name="voxclone-stream-in", daemon=True)
    with ws:
        sender.start()
        try:
            for raw in ws:
                message = json.loads(raw)
                if "error" in message:
                    raise _remote_error(message)
                if message.get("audio"):
                    writer.write(base64.b64decode(message["audio"]))
                if message.get("isFinal"):
                    break
        except ConnectionClosed:
            pass
    sender.join(timeout=1)
    if failed:
        raise failed[0]


def _remote_error(message: dict[str, Any]) -> RemoteError:
    error = message.get("error") or {}
    code = str(error.get("code", ""))
    status = {
        "unauthorized": 401,
        "forbidden": 403,
        "not_found": 404,
        "rate_limited": 429,
        "overloaded": 503,
        "not_ready": 503,
    }.get(code, 400 if error.get("field") else 500)
    return RemoteError(
        str(message.get("message") or error.get("message") or code),
        status,
        field=error.get("field"),
        limit=error.get("limit"),
    )


# -- in this process ----------------------------------------------------------------


async def _in_process(
    args: argparse.Namespace,
    settings: Settings,
    protocol_format: str,
    pieces: Iterator[str],
    writer: AudioWriter,
) -> None:
    from voxclone.bootstrap import build_runtime
    from voxclone.service.realtime_audio import parse_output_format
    from voxclone.service.realtime_session import RealtimeLimits, RealtimeSession, Voice

    runtime = await asyncio.to_thread(build_runtime, settings, warmup=False, with_voices=False)
    try:

        async def send(message: dict[str, Any]) -> None:
            if message.get("audio"):
                writer.write(base64.b64decode(message["audio"]))

        # No text rate or session length to keep here: the reader is local.
        limits = RealtimeLimits(
            max_session_s=float("inf"),
            inactivity_timeout_s=float("inf"),
            text_burst_chars=1 << 30,
        )
        session = RealtimeSession(
            runtime.speech,
            Voice(
                voice=args.voice or _local_default_voice(runtime, args.language),
                owner=LOCAL_OWNER,
                model=args.model,
                language=args.language,
                speed=args.speed,
            ),
            parse_output_format(protocol_format),
            send,
            limits=limits,
        )
        await asyncio.to_thread(session.check_voice)
        try:
            while (piece := await asyncio.to_thread(next, pieces, None)) is not None:
                session.text("default", piece)
            await session.end()
        finally:
            await session.close()
        if session.failure is not None:
            raise session.failure
    finally:
        runtime.close()


def _local_default_voice(runtime: Any, language: str | None) -> str:
    """The voice a request naming none speaks with (as /v1/info says it)."""
    speech = runtime.speech
    by_language = speech.language_defaults()
    return str(by_language.get(language) or speech.default_voice(speech.default_engine))
