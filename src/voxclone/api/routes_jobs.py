"""Background jobs: speech jobs (long texts → an audio URL), status, cancel, delete,
progress (SSE), and the signed download route for audio of a local blob store.

Jobs are per owner: another owner's job answers 404 like a missing one. Speech
jobs need the ``tts`` scope, refinement jobs the voices scopes (read to look,
write to cancel or delete).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from voxclone.api.auth import JobCaller, Principal, TTSCaller
from voxclone.api.blob_download import blob_response
from voxclone.api.deps import RuntimeDep
from voxclone.api.routes_tts import speech_request
from voxclone.api.schemas import DeletedOut, JobOut, SpeechJobRequest
from voxclone.api.streaming import CancelFlag, CancellableStreamingResponse
from voxclone.assembly import Runtime
from voxclone.errors import Conflict, Forbidden, InvalidInput, NotFound, NotReady
from voxclone.runtime.blobs import BlobNotFound, check_key
from voxclone.runtime.job_store import JobEvents, JobRecord
from voxclone.runtime.keys import SCOPE_TTS, SCOPE_VOICES_READ, SCOPE_VOICES_WRITE
from voxclone.service.dialogue import UNMARKED_FIELD
from voxclone.service.jobs import JOB_BLOB_PREFIX, SPEECH_JOB_KIND
from voxclone.synth.audio.file_encode import AudioFormat, content_type, file_extension

router = APIRouter(tags=["jobs"])

# An SSE comment this often keeps proxies from closing an idle progress stream.
SSE_KEEPALIVE_S = 15.0
# Without an update from this process, the stream re-reads the job this often:
# a job may be running on another replica, whose updates only reach the database.
SSE_POLL_S = 1.0
IDEMPOTENCY_KEY_MAX = 200


def checked_idempotency_key(value: str | None) -> str | None:
    """``Idempotency-Key`` as sent (jobs, dialogue jobs, books): a 400 naming
    it when it is not 1 to IDEMPOTENCY_KEY_MAX characters."""
    if value is not None and not 1 <= len(value) <= IDEMPOTENCY_KEY_MAX:
        raise InvalidInput(
            f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} characters",
            field="Idempotency-Key",
            limit=IDEMPOTENCY_KEY_MAX,
        )
    return value


def _idempotency_key(
    idempotency_key: Annotated[
        str | None,
        Header(
            description="the same key from the same caller returns the same job (or book) "
            f"instead of a second one (at most {IDEMPOTENCY_KEY_MAX} characters)"
        ),
    ] = None,
) -> str | None:
    return checked_idempotency_key(idempotency_key)


# The header every route that queues work takes (jobs, dialogue jobs, books),
# declared and checked once.
IdempotencyKey = Annotated[str | None, Depends(_idempotency_key)]


_EXTENSION_TYPES = {file_extension(fmt): content_type(fmt) for fmt in AudioFormat}


def _check_scope(principal: Principal, job: JobRecord, *, write: bool) -> None:
    if job.kind == SPEECH_JOB_KIND:
        needed = SCOPE_TTS
    else:
        needed = SCOPE_VOICES_WRITE if write else SCOPE_VOICES_READ
    if not principal.allows(needed):
        raise Forbidden(f"this API key lacks the '{needed}' scope", field="scope", limit=needed)


def _audio_link(request: Request, runtime: Runtime, job: JobRecord) -> tuple[str, str] | None:
    """(URL, expiry ISO time) of a succeeded speech job's audio, else None."""
    key = (job.result or {}).get("blob_key")
    if job.state != "succeeded" or not isinstance(key, str):
        return None
    ttl = max(1, int(runtime.settings.job_url_ttl_s))
    presigned = runtime.speech_jobs.blobs.presigned_url(key, expires_s=ttl)
    if presigned is not None:
        expires = int(datetime.now(UTC).timestamp()) + ttl
        return presigned, datetime.fromtimestamp(expires, UTC).isoformat()
    expires, sig = runtime.url_signer.sign(key, ttl)
    url = str(request.url_for("download_file", key=key))
    return f"{url}?expires={expires}&sig={sig}", datetime.fromtimestamp(expires, UTC).isoformat()


def job_out(request: Request, runtime: Runtime, job: JobRecord) -> JobOut:
    link = _audio_link(request, runtime, job)
    if link is None:
        return JobOut.of(job)
    return JobOut.of(job, audio_url=link[0], expires_at=link[1])


async def queued_job(
    request: Request,
    response: Response,
    runtime: Runtime,
    submit: Callable[[], tuple[JobRecord, bool]],
) -> JobOut:
    """A submitted job's answer: 202 with its Location, or 200 for the job an
    earlier request with the same Idempotency-Key created."""
    job, created = await run_in_threadpool(submit)
    if not created:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return job_out(request, runtime, job)


async def _load(runtime: Runtime, job_id: str, principal: Principal, *, write: bool) -> JobRecord:
    job = await run_in_threadpool(runtime.jobs.get, job_id, principal.owner)
    _check_scope(principal, job, write=write)
    return job


@router.post(
    "/v1/jobs/speech",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobOut,
    summary="Queue a long text; poll the job for an audio URL",
    responses={200: {"model": JobOut, "description": "the job this Idempotency-Key created"}},
)
async def create_speech_job(
    body: SpeechJobRequest,
    request: Request,
    response: Response,
    principal: TTSCaller,
    runtime: RuntimeDep,
    idempotency_key: IdempotencyKey,
) -> JobOut:
    req = speech_request(body, principal.owner, unmarked=principal.unmarked)
    jobs = runtime.speech_jobs
    return await queued_job(
        request, response, runtime, lambda: jobs.submit(req, idempotency_key=idempotency_key)
    )


@router.get("/v1/jobs/{job_id}", response_model=JobOut, summary="A job's state and progress")
async def get_job(
    job_id: str, request: Request, principal: JobCaller, runtime: RuntimeDep
) -> JobOut:
    job = await _load(runtime, job_id, principal, write=False)
    return job_out(request, runtime, job)


@router.post("/v1/jobs/{job_id}/cancel", response_model=JobOut, summary="Cancel a job")
async def cancel_job(
    job_id: str, request: Request, principal: JobCaller, runtime: RuntimeDep
) -> JobOut:
    await _load(runtime, job_id, principal, write=True)
    job = await run_in_threadpool(runtime.jobs.request_cancel, job_id, principal.owner)
    runtime.job_events.publish(job)
    return job_out(request, runtime, job)


@router.delete(
    "/v1/jobs/{job_id}",
    response_model=DeletedOut,
    response_model_exclude_none=True,
    summary="Delete a speech job and its audio (a running one stops)",
)
async def delete_job(job_id: str, principal: JobCaller, runtime: RuntimeDep) -> DeletedOut:
    job = await _load(runtime, job_id, principal, write=True)
    if job.kind != SPEECH_JOB_KIND:
        raise Conflict(
            "only speech jobs can be deleted; refinement jobs go with their voice",
            field="job_id",
        )
    jobs = runtime.speech_jobs
    await run_in_threadpool(jobs.delete, job_id, principal.owner)
    return DeletedOut(id=job_id)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


async def _job_events(
    events: JobEvents,
    read: Callable[[], JobRecord],
    render: Callable[[JobRecord], JobOut],
) -> AsyncIterator[bytes]:
    # The state as it is now goes out first (subscribed with it, so no update
    # can overtake it); an update landing between that read and the
    # subscription is caught by reading once more. Older snapshots than what
    # was sent are skipped, duplicates filtered.
    current: JobRecord = await run_in_threadpool(read)
    subscription = events.subscribe(current.id, initial=current)
    loop = asyncio.get_running_loop()
    try:
        subscription.offer(await run_in_threadpool(read))
        last: tuple[Any, ...] | None = None
        sent_at = ""
        quiet_since = loop.time()
        while True:
            try:
                job = await subscription.next(timeout=SSE_POLL_S)
            except TimeoutError:
                # Nothing from this process: the job may run on another replica.
                job = await run_in_threadpool(read)
                if loop.time() - quiet_since >= SSE_KEEPALIVE_S:
                    quiet_since = loop.time()
                    yield b": keep-alive\n\n"
            if job.updated_at < sent_at:
                continue
            sent_at = job.updated_at
            key = (job.state, job.progress, job.message)
            if key != last:
                last = key
                quiet_since = loop.time()
                yield _sse("done" if job.done else "progress", render(job).model_dump())
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
    principal: JobCaller,
    runtime: RuntimeDep,
) -> CancellableStreamingResponse:
    # Check existence, ownership and scope before the 200 goes out.
    await _load(runtime, job_id, principal, write=False)
    store = runtime.jobs
    return CancellableStreamingResponse(
        _job_events(
            runtime.job_events,
            lambda: store.get(job_id, principal.owner),
            lambda job: job_out(request, runtime, job),
        ),
        flag=CancelFlag(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.get(
    "/v1/files/{key:path}",
    name="download_file",
    summary="Download a job's audio through a signed link (no API key: the link is the key)",
    responses={
        200: {"description": "audio bytes", "content": {"audio/wav": {}, "audio/mpeg": {}}},
        403: {"description": "the link's signature is wrong or it has expired"},
    },
)
async def download_file(
    key: str,
    request: Request,
    runtime: RuntimeDep,
    expires: Annotated[int, Query(description="Unix time the link expires")],
    sig: Annotated[str, Query(max_length=128, description="HMAC-SHA256 of the key and expiry")],
) -> Response:
    signer = runtime.url_signer
    jobs = runtime.speech_jobs
    if signer is None or jobs is None:
        raise NotReady("downloads are not available on this server")
    why = signer.verify(key, expires, sig)
    if why == "expired":
        raise Forbidden(
            "this download link has expired; GET the job for a new one", field="expires"
        )
    if why is not None:
        raise Forbidden("this download link is not valid", field="sig")
    try:
        # Signed keys are only ever job audio; anything else was never handed out.
        if not key.startswith(JOB_BLOB_PREFIX):
            raise ValueError(key)
        check_key(key)
        # The signature proves the link was handed out, not that the job still
        # owns its audio: a deleted job, or a voice deleted since, ends it.
        job = await run_in_threadpool(jobs.served_job, key)
        if job is None:
            raise ValueError(key)
        # X-Voxclone-Watermark (api/watermark_header.py): as the job was rendered.
        request.state.unmarked = bool((job.payload or {}).get(UNMARKED_FIELD))
    except (ValueError, BlobNotFound):
        raise NotFound("this file no longer exists", field="key") from None
    extension = key.rsplit(".", 1)[-1]
    # Streamed in parts, never read whole: a job of an hour's speech is
    # ~115 MB of WAV (api/blob_download.py measured a 50 MiB download at
    # 50.13 MiB peak whole, 0.82 MiB in parts); Range lets a player seek.
    return await blob_response(
        jobs.blobs,
        key,
        range_header=request.headers.get("range"),
        media_type=_EXTENSION_TYPES.get(extension, "application/octet-stream"),
        headers={"Cache-Control": "private, max-age=60"},
        gone_field="key",
    )
