"""OpenAI-compatible speech: ``POST /v1/audio/speech``, ``/v1/audio/voices``, ``/v1/models``.

Unmodified OpenAI clients work against this server:

* ``model``: any of :data:`OPENAI_MODELS` (all speak with the same engine);
  other names get a 400 that lists them.
* ``voice``: one of our voices (built-in name, cloned voice id or name), or
  one of OpenAI's voice names, mapped by :data:`OPENAI_VOICE_ALIASES`:
  alloy, ballad, coral, fable, nova, sage, shimmer → ``clear_female``;
  ash, echo, onyx, verse → ``clear_male``. A cloned voice with the same name
  as an alias wins, so users can override an alias.
* ``response_format``: mp3 (default), opus, aac, flac, wav, pcm (raw 24 kHz
  16-bit little-endian mono, as OpenAI's).
* ``speed``: OpenAI allows 0.25-4.0; our engine keeps speech intelligible in
  0.5-2.0 only, so values outside are refused (422 naming the limit) rather
  than silently changed.
* ``stream_format``: ``audio`` (chunked audio, default) or ``sse`` (events
  ``speech.audio.delta`` carrying base64 audio, then ``speech.audio.done``).
* ``instructions``: free text; the first emotion it names (happy, sad,
  angry, surprised, calm, serious, whisper — or a common form such as
  "cheerful", "whispering") selects that preset.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from voxclone.api.auth import TTSCaller
from voxclone.api.cancellation import request_deadline
from voxclone.api.deps import RuntimeDep
from voxclone.api.schemas import (
    AudioVoicesOut,
    CatalogVoiceOut,
    ModelListOut,
    ModelOut,
    OpenAISpeechRequest,
)
from voxclone.api.streaming import open_audio_stream
from voxclone.bootstrap import Runtime
from voxclone.errors import InvalidInput, NotFound, VoxcloneError
from voxclone.service.speech import SpeechRequest
from voxclone.synth.controls import EMOTIONS, SpeechControls

router = APIRouter(tags=["openai"])

OPENAI_MODELS: tuple[str, ...] = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "kokoro", "voxclone")
OPENAI_FORMATS: tuple[str, ...] = ("mp3", "opus", "aac", "flac", "wav", "pcm")
PCM_RATE = 24_000

OPENAI_VOICE_ALIASES: dict[str, str] = {
    **dict.fromkeys(
        ("alloy", "ballad", "coral", "fable", "nova", "sage", "shimmer"), "clear_female"
    ),
    **dict.fromkeys(("ash", "echo", "onyx", "verse"), "clear_male"),
}

# Words in ``instructions`` that pick an emotion preset, besides the preset names.
_EMOTION_WORDS: dict[str, str] = {
    **{name: name for name in EMOTIONS},
    "cheerful": "happy",
    "joyful": "happy",
    "excited": "happy",
    "happily": "happy",
    "sadly": "sad",
    "melancholy": "sad",
    "gloomy": "sad",
    "angrily": "angry",
    "furious": "angry",
    "mad": "angry",
    "surprise": "surprised",
    "astonished": "surprised",
    "amazed": "surprised",
    "calmly": "calm",
    "soothing": "calm",
    "relaxed": "calm",
    "seriously": "serious",
    "formal": "serious",
    "stern": "serious",
    "whispering": "whisper",
    "whispered": "whisper",
    "whispers": "whisper",
}
_WORD = re.compile(r"[a-z]+")


def emotion_from_instructions(instructions: str | None) -> str:
    """The first emotion preset ``instructions`` names, else ``neutral``."""
    if not instructions:
        return "neutral"
    for word in _WORD.findall(instructions.lower()[:2000]):
        if word in _EMOTION_WORDS:
            return _EMOTION_WORDS[word]
    return "neutral"


def _resolve_voice_name(runtime: Runtime, voice: str, owner: str) -> str:
    """Our name for ``voice``: the user's own voice first, then OpenAI's aliases."""
    try:
        runtime.catalog.resolve(voice, owner)
        return voice
    except NotFound:
        alias = OPENAI_VOICE_ALIASES.get(voice.lower())
        if alias is None:
            raise
        return alias


def _to_speech_request(body: OpenAISpeechRequest, runtime: Runtime, owner: str) -> SpeechRequest:
    if body.model not in OPENAI_MODELS:
        raise _BadModel(
            f"unknown model '{body.model[:40]}'; use one of {', '.join(OPENAI_MODELS)}",
            field="model",
            limit=list(OPENAI_MODELS),
        )
    fmt = body.response_format.lower()
    if fmt not in OPENAI_FORMATS:
        raise InvalidInput(
            f"unsupported response_format '{body.response_format[:16]}'",
            field="response_format",
            limit=list(OPENAI_FORMATS),
        )
    speed = body.speed if "speed" in body.model_fields_set else None
    return SpeechRequest(
        text=body.input,
        voice=_resolve_voice_name(runtime, body.voice, owner),
        controls=SpeechControls(speed=speed, emotion=emotion_from_instructions(body.instructions)),
        format=fmt,
        sample_rate=PCM_RATE,
        owner=owner,
    )


class _BadModel(VoxcloneError):
    status = 400
    code = "invalid_model"


async def _sse_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    total = 0
    async for chunk in chunks:
        if not chunk:
            continue
        total += len(chunk)
        event = {"type": "speech.audio.delta", "audio": base64.b64encode(chunk).decode("ascii")}
        yield f"data: {json.dumps(event)}\n\n".encode()
    done = {
        "type": "speech.audio.done",
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        "audio_bytes": total,
    }
    yield f"data: {json.dumps(done)}\n\n".encode()


@router.post(
    "/v1/audio/speech",
    summary="OpenAI-compatible text to speech",
    response_class=Response,
    responses={200: {"description": "audio bytes or SSE", "content": {"audio/mpeg": {}}}},
)
async def audio_speech(
    body: OpenAISpeechRequest,
    request: Request,
    principal: TTSCaller,
    runtime: RuntimeDep,
) -> Response:
    deadline = request_deadline(request, runtime.settings.request_deadline_s)
    req = await run_in_threadpool(_to_speech_request, body, runtime, principal.owner)
    stream = await open_audio_stream(
        request, lambda flag: runtime.speech.stream(req, cancelled=flag, deadline=deadline)
    )
    if body.stream_format == "sse":
        return stream.response(
            _sse_events(stream.audio),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )
    return stream.response(stream.audio, media_type=stream.content_type)


@router.get("/v1/audio/voices", response_model=AudioVoicesOut, summary="Voices and OpenAI aliases")
async def audio_voices(
    principal: TTSCaller,
    runtime: RuntimeDep,
) -> AudioVoicesOut:
    listing = await run_in_threadpool(runtime.catalog.listing, principal.owner)
    return AudioVoicesOut(
        voices=[
            CatalogVoiceOut(
                id=v.id,
                name=v.name,
                description=v.description,
                language=v.language,
                builtin=v.builtin,
            )
            for v in listing
        ],
        aliases=dict(OPENAI_VOICE_ALIASES),
    )


@router.get("/v1/models", response_model=ModelListOut, summary="Models (OpenAI-compatible)")
async def models(principal: TTSCaller) -> ModelListOut:
    return ModelListOut(data=[ModelOut(id=name) for name in OPENAI_MODELS])
