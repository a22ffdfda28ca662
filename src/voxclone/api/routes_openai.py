"""OpenAI-compatible speech: ``POST /v1/audio/speech``, ``/v1/audio/voices``, ``/v1/models``.

Unmodified OpenAI clients work against this server:

* ``input``: at most 4,096 characters, as OpenAI's (api/openai_surface.py:
  a 400 in OpenAI's error shape that points to /v1/tts and jobs).
* ``model``: OpenAI's names (``tts-1``, ``tts-1-hd``, ``gpt-4o-mini-tts``,
  and their dated snapshots) speak with the default engine; an engine name
  (``kokoro``) or model id picks that engine (``GET /v1/models`` lists them);
  other names get OpenAI's 404 ``model_not_found``, listing them.
* ``voice``: a name or OpenAI's voice object ``{"id": "..."}``: one of our
  voices (built-in name, cloned voice id or name), or one of OpenAI's voice
  names: each speaks with a native English voice of its sex (``alloy`` →
  ``af_heart``, ``onyx`` → ``am_onyx``, ``marin`` → ``bf_emma``, …; the
  engine's own mapping, Kokoro's measured in docs/benchmarks.md "Voice
  table"). Without the standard voices installed, :data:`OPENAI_VOICE_ALIASES`:
  alloy, ballad, coral, fable, nova, sage, shimmer, marin → ``clear_female``;
  ash, echo, onyx, verse, cedar → ``clear_male``. A cloned voice with the same
  name as an alias wins, so users can override an alias. The ``X-Voice``
  response header names the voice that spoke.
* ``response_format``: mp3 (default), opus, aac, flac, wav, pcm (raw 24 kHz
  16-bit little-endian mono, as OpenAI's).
* ``speed``: accepted over OpenAI's whole range, 0.25-4.0, and clamped to
  0.5-2.0, the range in which our speech stays intelligible (the native API's
  range; docs/benchmarks.md "Speed accuracy"). Values outside 0.25-4.0 get a
  422 naming OpenAI's limit.
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
from voxclone.api.cancellation import client_set_deadline, request_deadline
from voxclone.api.deps import RuntimeDep
from voxclone.api.openai_surface import (
    as_openai_error,
    check_input_length,
    model_name,
    model_not_found,
)
from voxclone.api.schemas import (
    AudioVoicesOut,
    CatalogVoiceOut,
    ModelListOut,
    ModelOut,
    OpenAISpeechRequest,
)
from voxclone.api.speech_headers import ssml_headers, voice_header
from voxclone.api.streaming import open_audio_stream
from voxclone.assembly import Runtime
from voxclone.errors import InvalidInput, NotFound, UnknownModel, VoxcloneError
from voxclone.runtime.admission import AdmissionTerms
from voxclone.service.catalog import ResolvedVoice
from voxclone.service.speech.request import ResolvedRequest, SpeechRequest
from voxclone.service.speech.router import OPENAI_ALIASES, ModelInfo
from voxclone.synth.controls import EMOTIONS, SPEED_RANGE, SpeechControls
from voxclone.synth.engine.base import OPENAI_FEMALE, OPENAI_MALE

router = APIRouter(tags=["openai"])

# Model names OpenAI clients send; the router maps them to the default engine.
OPENAI_MODELS: tuple[str, ...] = OPENAI_ALIASES
OPENAI_FORMATS: tuple[str, ...] = ("mp3", "opus", "aac", "flac", "wav", "pcm")
PCM_RATE = 24_000

# The mapping of the earlier seven voices (Kokoro's ``openai_aliases``: each
# name to the clear voice of its sex); a running server answers with its catalog's
# (``VoiceCatalog.openai_aliases``), this only for an engine whose voices
# declare no OpenAI aliases.
OPENAI_VOICE_ALIASES: dict[str, str] = {
    **dict.fromkeys(OPENAI_FEMALE, "clear_female"),
    **dict.fromkeys(OPENAI_MALE, "clear_male"),
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


def _openai_voice(
    runtime: Runtime, voice: str, owner: str, engine: str
) -> tuple[str | None, ResolvedVoice | None]:
    """Our name for ``voice`` and, when it is the caller's own voice (or ours
    under that name), the voice itself, looked up here once: the router is
    handed it and does not look it up again. Else one of OpenAI's aliases
    (None: the engine's default voice, for an engine without the alias's voice)."""
    try:
        return voice, runtime.catalog.resolve(voice, owner, engine)
    except NotFound:
        # The requested engine's mapping; else the earlier seven's names (an
        # engine whose voices declare no OpenAI aliases).
        key = voice.lower()
        alias = runtime.catalog.openai_aliases(engine).get(key) or OPENAI_VOICE_ALIASES.get(key)
        if alias is None:
            raise
        return (alias if alias in runtime.catalog.builtins_by_engine()[engine] else None), None


def openai_speech_request(
    body: OpenAISpeechRequest, runtime: Runtime, owner: str, unmarked: bool = False
) -> ResolvedRequest:
    """The body as one request, resolved once (reads the store: call it from a
    worker thread): the voice the route looked up to map OpenAI's names is the
    voice that speaks."""
    engine = runtime.speech.engine_for(model_name(body.model)) or runtime.speech.default_engine
    fmt = body.response_format.lower()
    if fmt not in OPENAI_FORMATS:
        raise InvalidInput(
            f"unsupported response_format '{body.response_format[:16]}'",
            field="response_format",
            limit=list(OPENAI_FORMATS),
        )
    speed = _openai_speed(body.speed) if "speed" in body.model_fields_set else None
    # No voice (the captioned route's default): the language's default voice.
    named = body.voice_name
    name, voice = (None, None) if named is None else _openai_voice(runtime, named, owner, engine)
    built = SpeechRequest(
        text=body.input,
        voice=name,
        model=engine,
        controls=SpeechControls(speed=speed, emotion=emotion_from_instructions(body.instructions)),
        format=fmt,
        sample_rate=PCM_RATE,
        owner=owner,
        unmarked=unmarked,
    )
    return runtime.speech.request(built, voice=voice)


def _to_speech_request(body: OpenAISpeechRequest, runtime: Runtime, owner: str) -> SpeechRequest:
    """What :func:`openai_speech_request` makes of the body, as a plain request."""
    return openai_speech_request(body, runtime, owner).request


OPENAI_SPEED_RANGE = (0.25, 4.0)


def _openai_speed(value: float) -> float:
    """OpenAI's 0.25-4.0 clamped to our 0.5-2.0 (a client's 4.0 means "as fast as it goes")."""
    low, high = OPENAI_SPEED_RANGE
    if not low <= value <= high:  # NaN fails too
        raise InvalidInput(
            f"speed must be a number between {low} and {high}",
            field="speed",
            limit=list(OPENAI_SPEED_RANGE),
            value=value,
        )
    return min(max(value, SPEED_RANGE[0]), SPEED_RANGE[1])


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
    # Refusals before the audio starts carry OpenAI's error keys too.
    try:
        return await _audio_speech(body, request, principal, runtime)
    except VoxcloneError as exc:
        raise as_openai_error(exc) from exc


def _checked_model(body: OpenAISpeechRequest, runtime: Runtime) -> OpenAISpeechRequest:
    """``body`` with a dated OpenAI snapshot named by its family; an unknown
    model refused as OpenAI refuses one (404 ``model_not_found``)."""
    model = model_name(body.model)
    try:
        runtime.speech.engine_for(model)
    except UnknownModel as exc:
        raise model_not_found(exc, body.model) from None
    return body if model == body.model else body.model_copy(update={"model": model})


async def _audio_speech(
    body: OpenAISpeechRequest, request: Request, principal: TTSCaller, runtime: Runtime
) -> Response:
    # OpenAI's limit, before anything else: a 20,000-character input streamed
    # for 596 s before it (issue 46); this refusal takes microseconds.
    check_input_length(body.input)
    body = _checked_model(body, runtime)
    deadline = request_deadline(request, runtime.settings.request_deadline_s)
    # The service admits after the cache and identical streams in flight
    # (coalesce first, admit second), pricing the text as it will be spoken.
    terms = AdmissionTerms(
        deadline,
        must_finish=client_set_deadline(request),
        first_audio_s=request.app.state.settings.stream_first_audio_s,
    )
    # A flood is refused here, before any thread, in microseconds (the text
    # priced at half its length; identical bodies skip it: they may share).
    with runtime.speech.admission(
        SpeechRequest(text=body.input, model=body.model, owner=principal.owner),
        terms,
        stream=True,
        request_key=f"openai:{principal.owner}:{body.model_dump_json()}",
    ) as checked:
        # Resolved once: the SSML header and the render read the same object.
        req = await run_in_threadpool(
            openai_speech_request, body, runtime, principal.owner, principal.unmarked
        )
        # Input that starts with <speak> is SSML (OpenAI has no flag for it).
        headers = await ssml_headers(runtime, req)
        stream = await open_audio_stream(
            request,
            runtime.speech.stream,
            req,
            admission=checked,
            deadline=deadline,  # its first audio by it, or 504 before any header
        )
    headers.update(voice_header(req))
    if body.stream_format == "sse":
        return stream.response(
            _sse_events(stream.audio),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", **headers},
        )
    return stream.response(stream.audio, media_type=stream.content_type, headers=headers)


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
                engine=v.engine,
                model_id=v.model_id,
                aliases=list(v.aliases),
                sex=v.sex,
                accent=v.accent,
                default_for=list(v.default_for),
            )
            for v in listing
        ],
        aliases=runtime.catalog.openai_aliases(),
    )


def _model_out(info: ModelInfo) -> ModelOut:
    caps = info.capabilities
    return ModelOut(
        id=info.id,
        engine=info.engine,
        model_id=caps.model_id,
        model_version=caps.model_version,
        alias=info.alias,
        default=info.default,
        sample_rate=caps.sample_rate,
        languages=sorted(caps.languages),
        clone_method=caps.clone_method,
        native_controls=sorted(caps.native_controls),
        streaming=caps.streaming,
    )


@router.get("/v1/models", response_model=ModelListOut, summary="Models (OpenAI-compatible)")
async def models(principal: TTSCaller, runtime: RuntimeDep) -> ModelListOut:
    return ModelListOut(data=[_model_out(info) for info in runtime.speech.models()])


@router.get("/v1/models/{model_id}", response_model=ModelOut, summary="One model")
async def model(model_id: str, principal: TTSCaller, runtime: RuntimeDep) -> ModelOut:
    return _model_out(runtime.speech.model(model_id))
