"""Dialogue: ``POST /v1/audio/dialogue`` (one audio of several voices taking turns)
and ``POST /v1/jobs/dialogue`` (the same as a background job).

The answer is the audio (``stream: true``: chunked, a turn at a time), or
with ``timestamps: true`` JSON with base64 audio and the words labelled by
speaker; ``?format=srt`` / ``?format=vtt`` returns speaker-named subtitles.
Turns, pricing, gaps and loudness: service/dialogue.py.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import JSONResponse

from voxclone.api.auth import TTSCaller
from voxclone.api.cancellation import client_set_deadline, request_deadline, run_until_disconnect
from voxclone.api.deps import RuntimeDep
from voxclone.api.routes_jobs import IdempotencyKey, queued_job
from voxclone.api.schemas import DialogueFields, DialogueRequest, JobOut
from voxclone.api.streaming import CancelFlag, open_audio_stream
from voxclone.assembly import Runtime
from voxclone.errors import InvalidInput
from voxclone.service.dialogue import Dialogue, DialogueResult, Dialogues, Turn
from voxclone.service.dialogue_captions import speaker_srt, speaker_vtt, speaker_words_json

router = APIRouter(tags=["speech"])

CaptionFormat = Literal["json", "srt", "vtt"]
_AUDIO: dict[int | str, dict[str, Any]] = {
    200: {"description": "audio bytes", "content": {"audio/wav": {}, "audio/mpeg": {}}}
}


def dialogue_of(body: DialogueFields, owner: str, *, unmarked: bool = False) -> Dialogue:
    return Dialogue(
        turns=tuple(
            Turn(
                voice=t.voice,
                text=t.text,
                speed=t.speed,
                emotion=t.emotion,
                pause_ms=t.pause_ms,
                speaker=t.speaker,
            )
            for t in body.turns
        ),
        owner=owner,
        format=body.response_format,
        sample_rate=body.sample_rate,
        model=body.model,
        language=body.language,
        unmarked=unmarked,
    )


def dialogues(runtime: Runtime) -> Dialogues:
    """The dialogue use cases over the runtime's router, with its limits."""
    settings = runtime.settings
    return Dialogues(
        runtime.speech,
        max_output_s=settings.max_output_s,
        max_text_chars=settings.max_text_chars,
    )


async def _whole(
    request: Request, runtime: Runtime, dialogue: Dialogue, fmt: CaptionFormat, timestamps: bool
) -> Response:
    service = dialogues(runtime)
    deadline = request_deadline(request, runtime.settings.request_deadline_s)

    def work(*, cancelled: CancelFlag, deadline: float) -> DialogueResult:
        # Priced (413) and admitted (503) as a whole before any turn renders.
        prepared = service.prepare(dialogue)
        admissions = service.admit(prepared, deadline, stream=False)
        return service.synthesize(prepared, admissions, cancelled=cancelled, timestamps=timestamps)

    result = await run_until_disconnect(request, work, deadline=deadline)
    if fmt == "srt":
        return Response(speaker_srt(result.words), media_type="application/x-subrip; charset=utf-8")
    if fmt == "vtt":
        return Response(speaker_vtt(result.words), media_type="text/vtt; charset=utf-8")
    if not timestamps:
        return Response(result.audio, media_type=result.content_type)
    return JSONResponse(
        {
            "audio": base64.b64encode(result.audio).decode("ascii"),
            "audio_format": dialogue.format,
            "content_type": result.content_type,
            "duration_s": round(result.duration_s, 3),
            "speakers": list(dict.fromkeys(t.label for t in dialogue.turns)),
            "timestamps": speaker_words_json(result.words),
        }
    )


async def _streamed(request: Request, runtime: Runtime, dialogue: Dialogue) -> Response:
    service = dialogues(runtime)
    deadline = request_deadline(request, runtime.settings.request_deadline_s)
    first_audio_s = runtime.settings.stream_first_audio_s

    def start(*, cancelled: CancelFlag, deadline: float) -> tuple[str, Iterator[bytes]]:
        prepared = service.prepare(dialogue)
        admissions = service.admit(
            prepared,
            deadline,
            stream=True,
            must_finish=client_set_deadline(request),
            first_audio_s=first_audio_s,
        )
        return prepared.content_type, service.stream(prepared, admissions, cancelled=cancelled)

    stream = await open_audio_stream(request, start, deadline=deadline)
    return stream.response(stream.audio, media_type=stream.content_type)


@router.post(
    "/v1/audio/dialogue",
    summary="Several voices taking turns in one audio (captions by speaker, streamed)",
    responses=_AUDIO,
    response_class=Response,
)
async def dialogue(
    body: DialogueRequest,
    request: Request,
    principal: TTSCaller,
    runtime: RuntimeDep,
    format: Annotated[  # noqa: A002
        CaptionFormat, Query(description="json (the audio, or JSON with timestamps), srt or vtt")
    ] = "json",
) -> Response:
    spoken = dialogue_of(body, principal.owner, unmarked=principal.unmarked)
    if body.stream and (body.timestamps or format != "json"):
        raise InvalidInput(
            "a streamed dialogue sends audio only; ask for timestamps or subtitles without stream",
            field="stream",
        )
    if body.stream:
        return await _streamed(request, runtime, spoken)
    return await _whole(request, runtime, spoken, format, body.timestamps or format != "json")


@router.post(
    "/v1/jobs/dialogue",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobOut,
    summary="Queue a dialogue; poll the job for an audio URL",
    tags=["jobs"],
)
async def create_dialogue_job(
    body: DialogueFields,
    request: Request,
    response: Response,
    principal: TTSCaller,
    runtime: RuntimeDep,
    idempotency_key: IdempotencyKey,
) -> JobOut:
    spoken = dialogue_of(body, principal.owner, unmarked=principal.unmarked)
    jobs = runtime.speech_jobs
    service = dialogues(runtime)
    return await queued_job(
        request,
        response,
        runtime,
        lambda: jobs.submit_dialogue(spoken, service, idempotency_key=idempotency_key),
    )
