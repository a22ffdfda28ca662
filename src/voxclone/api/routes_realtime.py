"""Voice agents: ElevenLabs' text-to-speech WebSocket protocol.

``/v1/text-to-speech/{voice_id}/stream-input`` takes text as a language
model writes it and answers with audio and its per-character alignment;
``/v1/text-to-speech/{voice_id}/multi-stream-input`` does the same for
several contexts on one socket (barge-in: ``close_context``). Query:
``output_format`` (service/realtime_audio.py), ``model_id`` (a voxclone
model name; ElevenLabs' own ids speak with the voice's engine),
``language_code``, ``inactivity_timeout``; ``sync_alignment`` and
``auto_mode`` are accepted (alignment is always sent; clauses are always cut
as service/realtime_text.py says).

Messages in: the first ``{"text": " ", "voice_settings", "generation_config":
{"chunk_length_schedule"}, "xi_api_key"}``; then ``{"text", "flush",
"try_trigger_generation"}``; ``{"text": ""}`` ends the input (stream-input).
Multi-stream adds ``context_id``, ``close_context``, ``close_socket``.
Messages out: ``{"audio": base64, "isFinal": null, "alignment",
"normalizedAlignment"}`` (plus ``contextId``), then ``{"isFinal": true}``.
An error is ``{"message", "error": {"code", "message", "field", "limit"}}``
followed by a close (1008 refused, 1007 malformed, 1013 busy).

Authentication: ``xi-api-key`` header, the first message's ``xi_api_key``
or ``Authorization: Bearer``, all checked as voxclone keys with the ``tts``
scope (api/auth.py). voice_settings: ``speed`` is honoured; ``stability``,
``similarity_boost``, ``style`` and ``use_speaker_boost`` have no voxclone
equivalent and are ignored.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import anyio
from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from voxclone.api.auth import Principal, enforce_rate_limit
from voxclone.errors import (
    Forbidden,
    InvalidInput,
    NotReady,
    Overloaded,
    RateLimited,
    VoxcloneError,
)
from voxclone.runtime.keys import SCOPE_TTS
from voxclone.service.realtime_audio import parse_output_format
from voxclone.service.realtime_session import RealtimeLimits, RealtimeSession, Voice
from voxclone.service.realtime_text import DEFAULT_SCHEDULE

log = logging.getLogger(__name__)

router = APIRouter(tags=["voice agents"])

DEFAULT_CONTEXT = "default"  # multi-stream messages without a context_id
CLOSE_NORMAL, CLOSE_MALFORMED, CLOSE_REFUSED, CLOSE_BUSY = 1000, 1007, 1008, 1013
_MAX_ID_CHARS = 128


class ProtocolError(InvalidInput):
    """A message the protocol does not allow (closes with 1007)."""


def _limits(websocket: WebSocket) -> RealtimeLimits:
    limits = getattr(websocket.app.state, "realtime_limits", None)
    return limits if isinstance(limits, RealtimeLimits) else RealtimeLimits()


def _authenticate(websocket: WebSocket, message_key: str | None) -> Principal:
    header = websocket.headers.get("authorization")
    key = websocket.headers.get("xi-api-key") or message_key
    if key and not header:
        header = f"Bearer {key.strip()}"
    principal: Principal = websocket.app.state.authenticator.authenticate(header)
    if not principal.allows(SCOPE_TTS):
        raise Forbidden(
            f"this API key lacks the '{SCOPE_TTS}' scope", field="scope", limit=SCOPE_TTS
        )
    client = websocket.client.host if websocket.client else "unknown"
    identity = principal.rate_limit_identity or f"addr:{client}"
    enforce_rate_limit(websocket.app.state.rate_limiter, identity, websocket.app.state.metrics)
    return principal


def _parse(raw: str, limits: RealtimeLimits) -> dict[str, Any]:
    if len(raw) > limits.max_message_chars * 2 + 4096:
        raise InvalidInput(
            f"a message holds at most {limits.max_message_chars} characters of text",
            field="text",
            limit=limits.max_message_chars,
        )
    try:
        message = json.loads(raw)
    except ValueError:
        raise ProtocolError("a message must be a JSON object", field="message") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object", field="message")
    text = message.get("text")
    if text is not None and not isinstance(text, str):
        raise ProtocolError("text must be a string", field="text")
    for flag in ("flush", "try_trigger_generation", "close_context", "close_socket"):
        if message.get(flag) is not None and not isinstance(message[flag], bool):
            raise ProtocolError(f"{flag} must be true or false", field=flag)
    context_id = message.get("context_id")
    if context_id is not None and (
        not isinstance(context_id, str) or not 0 < len(context_id) <= _MAX_ID_CHARS
    ):
        raise ProtocolError(
            f"context_id must be a string of 1 to {_MAX_ID_CHARS} characters",
            field="context_id",
            limit=_MAX_ID_CHARS,
        )
    return message


def _speed(message: dict[str, Any]) -> float | None:
    settings = message.get("voice_settings")
    if settings is None:
        return None
    if not isinstance(settings, dict):
        raise ProtocolError("voice_settings must be an object", field="voice_settings")
    speed = settings.get("speed")
    if speed is None:
        return None
    if isinstance(speed, bool) or not isinstance(speed, int | float):
        raise ProtocolError("voice_settings.speed must be a number", field="voice_settings.speed")
    return float(speed)


def _schedule(message: dict[str, Any]) -> tuple[int, ...]:
    config = message.get("generation_config") or {}
    if not isinstance(config, dict):
        raise ProtocolError("generation_config must be an object", field="generation_config")
    schedule = config.get("chunk_length_schedule")
    if schedule is None:
        return DEFAULT_SCHEDULE
    if (
        not isinstance(schedule, list)
        or not 0 < len(schedule) <= 16
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in schedule)
    ):
        raise ProtocolError(
            "generation_config.chunk_length_schedule must be a list of 1 to 16 integers",
            field="generation_config.chunk_length_schedule",
        )
    return tuple(schedule)


def _model(websocket: WebSocket, runtime: Any) -> str | None:
    """A voxclone model name is honoured; ElevenLabs' ids (eleven_flash_v2_5 …)
    speak with the voice's own engine."""
    model = websocket.query_params.get("model_id")
    if model and model in runtime.speech.model_names:
        return model
    return None


def _inactivity_s(websocket: WebSocket, limits: RealtimeLimits) -> float:
    raw = websocket.query_params.get("inactivity_timeout")
    if raw is None:
        return limits.inactivity_timeout_s
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= limits.max_inactivity_timeout_s:
        raise InvalidInput(
            f"inactivity_timeout must be a number of seconds in (0, "
            f"{limits.max_inactivity_timeout_s:g}]",
            field="inactivity_timeout",
            limit=limits.max_inactivity_timeout_s,
        )
    return value


async def _refuse(websocket: WebSocket, exc: VoxcloneError) -> None:
    """Send the error as the protocol's message, then close."""
    if isinstance(exc, ProtocolError):
        code = CLOSE_MALFORMED
    elif isinstance(exc, Overloaded | RateLimited | NotReady):
        code = CLOSE_BUSY
    else:
        code = CLOSE_REFUSED
    try:
        await websocket.send_json({"message": exc.message, **exc.to_body()})
        await websocket.close(code=code, reason=exc.code[:120])
    except (WebSocketDisconnect, RuntimeError):
        pass  # the client has gone already


async def _serve(websocket: WebSocket, voice_id: str, *, multi: bool) -> None:
    await websocket.accept()
    limits = _limits(websocket)
    session: RealtimeSession | None = None
    try:
        runtime = getattr(websocket.app.state, "runtime", None)
        if runtime is None:
            raise NotReady("the server is still loading models; retry shortly")
        output = parse_output_format(websocket.query_params.get("output_format"))
        inactivity_s = _inactivity_s(websocket, limits)
        with anyio.fail_after(limits.first_message_timeout_s):
            first = _parse(await websocket.receive_text(), limits)
        principal = _authenticate(websocket, first.get("xi_api_key"))
        voice = Voice(
            voice=voice_id,
            owner=principal.owner,
            model=_model(websocket, runtime),
            language=websocket.query_params.get("language_code") or None,
            speed=_speed(first),
            unmarked=principal.unmarked,
        )

        async def send(message: dict[str, Any]) -> None:
            await websocket.send_text(json.dumps(message))

        session = RealtimeSession(
            runtime.speech,
            voice,
            output,
            send,
            limits=limits,
            schedule=_schedule(first),
            multi=multi,
        )
        await anyio.to_thread.run_sync(session.check_voice)
        started = time.monotonic()
        await _messages(websocket, session, first, inactivity_s, started, multi=multi)
        if session.failure is not None:
            await _refuse(websocket, session.failure)
            return
        await websocket.close(code=CLOSE_NORMAL)
    except TimeoutError:
        await _refuse(
            websocket,
            InvalidInput(
                "no text arrived in time: the socket closes after "
                f"{limits.first_message_timeout_s:g} s before the first message or "
                "the inactivity_timeout between later ones",
                field="inactivity_timeout",
                limit=limits.inactivity_timeout_s,
            ),
        )
    except VoxcloneError as exc:
        await _refuse(websocket, exc)
    except WebSocketDisconnect:
        pass
    finally:
        if session is not None:
            await session.close()


async def _messages(
    websocket: WebSocket,
    session: RealtimeSession,
    first: dict[str, Any],
    inactivity_s: float,
    started: float,
    *,
    multi: bool,
) -> None:
    limits = session.limits
    message = first
    while True:
        if session.failure is not None:
            return
        done = await _handle(websocket, session, message, multi=multi)
        if done:
            return
        left = limits.max_session_s - (time.monotonic() - started)
        if left <= 0:
            raise InvalidInput(
                f"a session lasts at most {limits.max_session_s:g} s",
                field="session",
                limit=limits.max_session_s,
            )
        with anyio.fail_after(min(inactivity_s, left)):
            raw = await _receive(websocket, session)
        message = _parse(raw, limits)


async def _receive(websocket: WebSocket, session: RealtimeSession) -> str:
    """The next text frame (a binary one is malformed)."""
    event = await websocket.receive()
    if event["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(event.get("code", 1000))
    if event.get("text") is None:
        raise ProtocolError("messages are JSON text frames, not binary", field="message")
    text: str = event["text"]
    return text


async def _end_unless_gone(websocket: WebSocket, session: RealtimeSession) -> None:
    """Speak what is left, while still reading the socket: a client that leaves
    meanwhile (or a barge-in that closes the socket) stops the work at once."""
    ending = asyncio.ensure_future(session.end())
    while True:
        reading = asyncio.ensure_future(websocket.receive())
        await asyncio.wait({ending, reading}, return_when=asyncio.FIRST_COMPLETED)
        if ending.done():
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
            ending.result()
            return
        if reading.result()["type"] == "websocket.disconnect":
            break  # messages after the end of input are ignored; a close is not
    ending.cancel()
    await session.close()
    raise WebSocketDisconnect(1000)


async def _handle(
    websocket: WebSocket, session: RealtimeSession, message: dict[str, Any], *, multi: bool
) -> bool:
    """Apply one message; True when the socket is to close (after its audio)."""
    text = message.get("text")
    if not multi:
        if text == "":
            await _end_unless_gone(websocket, session)
            return True
        if text is not None:
            session.text(DEFAULT_CONTEXT, text, flush=bool(message.get("flush")))
        elif message.get("flush"):
            session.flush(DEFAULT_CONTEXT)
        return False
    if message.get("close_socket"):
        await _end_unless_gone(websocket, session)
        return True
    context_id = message.get("context_id") or DEFAULT_CONTEXT
    if message.get("close_context"):
        await session.close_context(context_id)
        return False
    if text:
        session.text(context_id, text, flush=bool(message.get("flush")))
    elif text is not None:
        session.context(context_id)  # " " opens a context; "" keeps it alive
    if message.get("flush"):
        session.flush(context_id)
    return False


@router.websocket("/v1/text-to-speech/{voice_id}/stream-input")
async def stream_input(websocket: WebSocket, voice_id: str) -> None:
    await _serve(websocket, voice_id, multi=False)


@router.websocket("/v1/text-to-speech/{voice_id}/multi-stream-input")
async def multi_stream_input(websocket: WebSocket, voice_id: str) -> None:
    await _serve(websocket, voice_id, multi=True)
