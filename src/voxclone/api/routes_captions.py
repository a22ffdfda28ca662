"""Speech with word timestamps: ``POST /v1/audio/speech/captioned`` (and ``/v1/tts``'s
``"timestamps": true``).

The body is OpenAI's speech body (``model``, ``input``, ``voice``,
``response_format``, ``speed``, ``instructions``) plus ``stream``. The answer
has the shape Kokoro-FastAPI's captioned clients read::

    {"audio": "<base64>", "audio_format": "mp3",
     "timestamps": [{"word": "1984", "start_time": 0.25, "end_time": 1.725}, ...]}

Times are seconds in the returned audio (after speed changes, joins and
pauses); words are the caller's own ("1984", not "nineteen eighty-four").
``?format=srt`` or ``?format=vtt`` returns subtitles instead (the audio is
rendered and dropped). ``"stream": true`` sends server-sent events: each
``speech.audio.delta`` carries base64 audio and the words whose speech ends
inside the audio sent so far, then ``speech.audio.done``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from voxclone.api.auth import TTSCaller
from voxclone.api.cancellation import request_deadline, run_until_disconnect
from voxclone.api.deps import RuntimeDep
from voxclone.api.routes_openai import openai_speech_request
from voxclone.api.schemas import CaptionedSpeechRequest
from voxclone.api.speech_headers import voice_header
from voxclone.api.streaming import CancelFlag, open_audio_stream
from voxclone.assembly import Runtime
from voxclone.runtime.admission import AdmissionTerms
from voxclone.service.speech.request import Speakable
from voxclone.synth.text.wordtimes import WordTime, to_srt, to_vtt

router = APIRouter(tags=["speech"])

CaptionFormat = Literal["json", "srt", "vtt"]


def timestamps_json(words: tuple[WordTime, ...] | list[WordTime]) -> list[dict[str, object]]:
    return [
        {"word": w.word, "start_time": round(w.start_s, 3), "end_time": round(w.end_s, 3)}
        for w in words
    ]


async def captioned_response(
    request: Request, runtime: Runtime, speech: Speakable, caption_format: CaptionFormat
) -> Response:
    """The whole file with its word times (JSON), or only its subtitles."""
    req = runtime.speech.request(speech)  # resolved once, for the precheck and the render
    deadline = request_deadline(request, runtime.settings.request_deadline_s)
    with runtime.speech.admission(req, AdmissionTerms(deadline), stream=False) as terms:
        result = await run_until_disconnect(
            request, runtime.speech.synthesize_captioned, req, deadline=deadline, admission=terms
        )
    voice = voice_header(req)
    if caption_format == "srt":
        srt = to_srt(result.words)
        return Response(srt, media_type="application/x-subrip; charset=utf-8", headers=voice)
    if caption_format == "vtt":
        return Response(to_vtt(result.words), media_type="text/vtt; charset=utf-8", headers=voice)
    return JSONResponse(
        headers=voice,
        content={
            "audio": base64.b64encode(result.audio).decode("ascii"),
            "audio_format": req.request.format,
            "content_type": result.content_type,
            "duration_s": round(result.duration_s, 3),
            "timestamps": timestamps_json(result.words),
        },
    )


def _sse(parts: Iterator[tuple[bytes, list[WordTime]]], fmt: str) -> Iterator[bytes]:
    total = 0
    for data, words in parts:
        total += len(data)
        event = {
            "type": "speech.audio.delta",
            "audio": base64.b64encode(data).decode("ascii"),
            "audio_format": fmt,
            "timestamps": timestamps_json(words),
        }
        yield f"data: {json.dumps(event)}\n\n".encode()
    yield f"data: {json.dumps({'type': 'speech.audio.done', 'audio_bytes': total})}\n\n".encode()


async def captioned_stream(request: Request, runtime: Runtime, speech: Speakable) -> Response:
    req = runtime.speech.request(speech)  # resolved once, for the precheck and the render
    deadline = request_deadline(request, runtime.settings.request_deadline_s)
    terms = AdmissionTerms(
        deadline, must_finish=False, first_audio_s=request.app.state.settings.stream_first_audio_s
    )
    with runtime.speech.admission(req, terms, stream=True) as checked:

        def start(*, cancelled: CancelFlag, deadline: float) -> tuple[str, Iterator[bytes]]:
            _, parts = runtime.speech.stream_captioned(
                req, cancelled=cancelled, deadline=deadline, admission=checked
            )
            return "text/event-stream", _sse(parts, req.request.format)

        # Each event carries audio: the first one by the deadline, or 504.
        stream = await open_audio_stream(request, start, deadline=deadline, first_audio_index=0)
    headers = {"Cache-Control": "no-cache", **voice_header(req)}
    return stream.response(stream.audio, media_type="text/event-stream", headers=headers)


@router.post(
    "/v1/audio/speech/captioned",
    summary="Speech with word timestamps (Kokoro-FastAPI shape), SRT/WebVTT, or SSE",
    response_class=Response,
)
async def captioned_speech(
    body: CaptionedSpeechRequest,
    request: Request,
    principal: TTSCaller,
    runtime: RuntimeDep,
    format: Annotated[CaptionFormat, Query(description="json, srt or vtt")] = "json",  # noqa: A002
) -> Response:
    # Resolved once, its voice looked up once (mapping OpenAI's names needs it).
    req = await run_in_threadpool(
        openai_speech_request, body, runtime, principal.owner, principal.unmarked
    )
    if body.stream and format == "json":
        return await captioned_stream(request, runtime, req)
    return await captioned_response(request, runtime, req, format)
