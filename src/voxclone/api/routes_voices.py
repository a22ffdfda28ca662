"""Voice library and background jobs: enroll, list, rename, delete, refine, progress (SSE)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, Response, UploadFile, status
from starlette.concurrency import run_in_threadpool

from voxclone.api.auth import VoiceReader, VoiceWriter
from voxclone.api.deps import RuntimeDep, get_voice_service
from voxclone.api.schemas import (
    DeletedOut,
    EnrolledVoiceOut,
    JobOut,
    RefineRequest,
    RenameVoiceRequest,
    VoiceListOut,
    VoiceOut,
)
from voxclone.api.streaming import CancelFlag, CancellableStreamingResponse
from voxclone.errors import InvalidInput, NotReady
from voxclone.runtime.job_store import JobEvents, JobRecord

router = APIRouter(tags=["voices"])


def request_types() -> tuple[Any, Any]:
    """(ConsentInput, EnrollRequest) of the voice service, imported when first needed."""
    try:
        from voxclone.service.voices import ConsentInput, EnrollRequest
    except ImportError:
        raise NotReady("voice cloning is not available on this server") from None
    return ConsentInput, EnrollRequest


# An SSE comment this often keeps proxies from closing an idle progress stream.
SSE_KEEPALIVE_S = 15.0


def _consent_given(value: str) -> bool:
    return value.strip().lower() == "true"


@router.post(
    "/v1/voices",
    status_code=status.HTTP_201_CREATED,
    response_model=EnrolledVoiceOut,
    summary="Clone a voice from one or more reference recordings (consent required)",
)
async def enroll_voice(
    request: Request,
    principal: VoiceWriter,
    audio: Annotated[
        list[UploadFile],
        File(
            description="1.5-30 s of speech, any common format; repeat the field to send "
            "several recordings of the same speaker (pooled into one voice)"
        ),
    ],
    name: Annotated[str, Form(description="a name for the voice, unique per owner")],
    consent: Annotated[str, Form(description='must be "true": the speaker agreed')],
    consent_statement: Annotated[str, Form(description="the consent text agreed to")],
    given_by: Annotated[str | None, Form(description="who consented (default: caller)")] = None,
    language: Annotated[str, Form()] = "en-us",
    keep_reference: Annotated[bool, Form(description="keep the raw recording")] = False,
    refine: Annotated[bool, Form(description="start a background refinement job")] = False,
    match_tone: Annotated[
        bool, Form(description="give the clone the recording's tone (microphone, room, timbre)")
    ] = True,
    model: Annotated[
        str | None,
        Form(description="engine to clone for (GET /v1/models); default engine if unset"),
    ] = None,
) -> EnrolledVoiceOut:
    if not _consent_given(consent):
        raise InvalidInput(
            'cloning a voice needs the speaker\'s consent: send consent="true"',
            field="consent",
        )
    if not consent_statement.strip():
        raise InvalidInput("consent_statement must not be empty", field="consent_statement")
    voices = get_voice_service(request)
    consent_input, enroll_request = request_types()
    data = [await clip.read() for clip in audio]
    req = enroll_request(
        audio=data[0],
        extra_audio=tuple(data[1:]),
        name=name,
        owner=principal.owner,
        consent=consent_input(
            given=True,
            statement=consent_statement,
            given_by=(given_by or "").strip() or principal.owner,
            client_address=request.client.host if request.client else None,
        ),
        language=language,
        keep_reference=keep_reference,
        refine=refine,
        match_tone=match_tone,
        **({"model": model} if model else {}),
    )
    voice, job = await run_in_threadpool(voices.enroll, req)
    out = VoiceOut.of(voice)
    return EnrolledVoiceOut(**out.model_dump(), job=JobOut.of(job) if job else None)


@router.post(
    "/v1/voices/{voice_id}/recordings",
    response_model=VoiceOut,
    summary="Add recordings of the speaker to a voice (re-cloned as a new version)",
)
async def add_recordings(
    voice_id: str,
    request: Request,
    principal: VoiceWriter,
    audio: Annotated[
        list[UploadFile],
        File(description="more recordings of the same speaker; repeat the field for several"),
    ],
) -> VoiceOut:
    voices = get_voice_service(request)
    data = [await clip.read() for clip in audio]
    updated = await run_in_threadpool(voices.add_recordings, voice_id, principal.owner, data)
    return VoiceOut.of(updated)


@router.get("/v1/voices", response_model=VoiceListOut, summary="Your cloned voices")
async def list_voices(request: Request, principal: VoiceReader) -> VoiceListOut:
    voices = get_voice_service(request)
    summaries = await run_in_threadpool(voices.list, principal.owner)
    return VoiceListOut(voices=[VoiceOut.of(s) for s in summaries])


@router.get("/v1/voices/{voice_id}", response_model=VoiceOut)
async def get_voice(voice_id: str, request: Request, principal: VoiceReader) -> VoiceOut:
    voices = get_voice_service(request)
    return VoiceOut.of(await run_in_threadpool(voices.get, voice_id, principal.owner))


@router.patch("/v1/voices/{voice_id}", response_model=VoiceOut, summary="Rename a voice")
async def rename_voice(
    voice_id: str,
    body: RenameVoiceRequest,
    request: Request,
    principal: VoiceWriter,
) -> VoiceOut:
    voices = get_voice_service(request)
    return VoiceOut.of(await run_in_threadpool(voices.rename, voice_id, principal.owner, body.name))


@router.delete(
    "/v1/voices/{voice_id}",
    response_model=DeletedOut,
    response_model_exclude_none=True,
    summary="Delete a voice, its consent record and all audio cached with it",
    responses={
        202: {
            "model": DeletedOut,
            "description": "voice deleted; a cache tier (Redis) was unreachable, so purging "
            "its cached audio is journaled and completes when the tier is back",
        }
    },
)
async def delete_voice(
    voice_id: str, request: Request, response: Response, principal: VoiceWriter
) -> DeletedOut:
    voices = get_voice_service(request)
    deleted = await run_in_threadpool(voices.delete, voice_id, principal.owner)
    if getattr(deleted, "purge_pending", False):
        response.status_code = status.HTTP_202_ACCEPTED
        return DeletedOut(id=deleted.id, purge="pending")
    return DeletedOut(id=deleted.id)


@router.post(
    "/v1/voices/{voice_id}/refine",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobOut,
    summary="Start a background job that refines the voice",
)
async def refine_voice(
    voice_id: str,
    request: Request,
    principal: VoiceWriter,
    body: RefineRequest | None = None,
) -> JobOut:
    voices = get_voice_service(request)
    budget = body.budget_s if body else None
    job = await run_in_threadpool(voices.start_refine, voice_id, principal.owner, budget)
    return JobOut.of(job)


@router.get("/v1/jobs/{job_id}", response_model=JobOut)
async def get_job(job_id: str, request: Request, principal: VoiceReader) -> JobOut:
    voices = get_voice_service(request)
    return JobOut.of(await run_in_threadpool(voices.get_job, job_id, principal.owner))


@router.post("/v1/jobs/{job_id}/cancel", response_model=JobOut)
async def cancel_job(job_id: str, request: Request, principal: VoiceWriter) -> JobOut:
    voices = get_voice_service(request)
    return JobOut.of(await run_in_threadpool(voices.cancel_job, job_id, principal.owner))


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


async def _job_events(
    events: JobEvents, voices: Any, job_id: str, owner: str
) -> AsyncIterator[bytes]:
    # The state as it is now goes out first (subscribed with it, so no update
    # can overtake it); an update landing between that read and the
    # subscription is caught by reading once more. Older snapshots than what
    # was sent are skipped, duplicates filtered.
    current: JobRecord = await run_in_threadpool(voices.get_job, job_id, owner)
    subscription = events.subscribe(job_id, initial=current)
    try:
        subscription.offer(await run_in_threadpool(voices.get_job, job_id, owner))
        last: tuple[Any, ...] | None = None
        sent_at = ""
        while True:
            try:
                job = await subscription.next(timeout=SSE_KEEPALIVE_S)
            except TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if job.updated_at < sent_at:
                continue
            sent_at = job.updated_at
            key = (job.state, job.progress, job.message)
            if key != last:
                last = key
                yield _sse("done" if job.done else "progress", JobOut.of(job).model_dump())
            if job.done:
                return
    finally:
        subscription.close()


@router.get(
    "/v1/jobs/{job_id}/events",
    summary="Server-sent events with the job's progress until it ends",
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def job_events(
    job_id: str,
    request: Request,
    principal: VoiceReader,
    runtime: RuntimeDep,
) -> CancellableStreamingResponse:
    voices = get_voice_service(request)
    events = runtime.job_events
    # Check existence and ownership before the 200 goes out.
    await run_in_threadpool(voices.get_job, job_id, principal.owner)
    return CancellableStreamingResponse(
        _job_events(events, voices, job_id, principal.owner),
        flag=CancelFlag(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
