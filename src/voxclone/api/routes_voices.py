"""Voice library: enroll, list, rename, delete, refine (jobs: api/routes_jobs.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, Response, UploadFile, status
from starlette.concurrency import run_in_threadpool

from voxclone.api.auth import VoiceReader, VoiceWriter
from voxclone.api.cancellation import request_deadline, run_until_disconnect
from voxclone.api.deps import get_runtime, get_voice_service
from voxclone.api.routes_receipts import issue_receipt
from voxclone.api.schemas import (
    DeletedOut,
    EnrolledVoiceOut,
    JobOut,
    RefineRequest,
    RenameVoiceRequest,
    SaveBlendRequest,
    VoiceListOut,
    VoiceOut,
)
from voxclone.errors import Conflict, InvalidInput, NotReady

router = APIRouter(tags=["voices"])


def request_types() -> tuple[Any, Any]:
    """(ConsentInput, EnrollRequest) of the voice service, imported when first needed."""
    try:
        from voxclone.service.voices.request import ConsentInput, EnrollRequest
    except ImportError:
        raise NotReady("voice cloning is not available on this server") from None
    return ConsentInput, EnrollRequest


def _consent_given(value: str) -> bool:
    return value.strip().lower() == "true"


@router.post(
    "/v1/voices",
    status_code=status.HTTP_201_CREATED,
    response_model=EnrolledVoiceOut,
    summary="Clone a voice from one or more reference recordings (consent required)",
    description="Enrollments render a few at a time, in arrival order (settings enroll_slots, "
    "enroll_queue): one that could not be answered within its deadline (enroll_deadline_s, "
    "or less with X-Request-Deadline) is refused at once with 503 and Retry-After. With "
    "wait=true (the default) a client that goes away cancels its enrollment and no voice is "
    "kept; with wait=false the voice is stored and its id returned at once.",
    responses={503: {"description": "enrollment queue full; retry after Retry-After seconds"}},
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
    consent: Annotated[
        str, Form(description='typed consent: must be "true", the speaker agreed')
    ] = "",
    consent_statement: Annotated[
        str, Form(description="typed consent: the consent text agreed to")
    ] = "",
    consent_audio: Annotated[
        UploadFile | None,
        File(
            description="spoken consent (required when the server's consent_mode is "
            "spoken): the speaker reading the phrase of consent_phrase_id; refused (422, "
            "reason words / speaker) unless it says the phrase in the recordings' voice"
        ),
    ] = None,
    consent_phrase_id: Annotated[
        str | None,
        Form(description="spoken consent: the phrase_id from POST /v1/consent/phrases"),
    ] = None,
    given_by: Annotated[str | None, Form(description="who consented (default: caller)")] = None,
    language: Annotated[str, Form()] = "en-us",
    keep_reference: Annotated[bool, Form(description="keep the raw recording")] = False,
    refine: Annotated[bool, Form(description="start a background refinement job")] = False,
    match_tone: Annotated[
        bool, Form(description="give the clone the recording's tone (microphone, room, timbre)")
    ] = True,
    keep_clone: Annotated[
        bool,
        Form(
            description="keep the clone even where a built-in voice of the speaker's sex, given "
            "the recording's tone, is heard about as close to the reference (by default that "
            "built-in, moved toward the reference, speaks instead: quality.started_from_builtin "
            "names it and quality.clone_share says how far it moved)"
        ),
    ] = False,
    model: Annotated[
        str | None,
        Form(description="engine to clone for (GET /v1/models); default engine if unset"),
    ] = None,
    wait: Annotated[
        bool,
        Form(
            description="false: answer as soon as the voice can speak (the atlas lookup, "
            "~0.3 s on 2 cores) and calibrate pitch and tone and write the quality report "
            "in report_job (~5 s; the voice then becomes version 2). Prompt engines always "
            "wait."
        ),
    ] = True,
) -> EnrolledVoiceOut:
    voices = get_voice_service(request)
    spoken_parts = _spoken_consent_parts(request, consent_audio, consent_phrase_id)
    if spoken_parts is None:  # typed consent; spoken consent is the phrase read, checked later
        _check_typed_consent(consent, consent_statement)
    consent_input, enroll_request = request_types()
    deadline = request_deadline(request, request.app.state.settings.enroll_deadline_s)
    # On the event loop, before any audio work: a refusal answers in milliseconds.
    ticket = voices.admit_enrollment(wait=wait, model=model, deadline=deadline)
    try:
        # Taken (single use) only once admitted: a busy server's 503 leaves the
        # speaker's phrase valid for the retry instead of making them read a new one.
        spoken = await _take_spoken_consent(voices, principal.owner, spoken_parts)
        # What a spoken consent agreed to is the phrase the speaker read.
        statement = consent_statement if spoken is None else spoken.phrase.text
        data = [await clip.read() for clip in audio]
        req = enroll_request(
            audio=data[0],
            extra_audio=tuple(data[1:]),
            name=name,
            owner=principal.owner,
            consent=consent_input(
                given=True,
                statement=statement,
                given_by=(given_by or "").strip() or principal.owner,
                client_address=request.client.host if request.client else None,
            ),
            language=language,
            keep_reference=keep_reference,
            refine=refine,
            match_tone=match_tone,
            keep_clone=keep_clone,
            spoken_consent=spoken,
            **({"model": model} if model else {}),
        )
        try:
            if wait:
                # The client waits for the voice: if it leaves, the enrollment stops
                # and stores nothing (api/cancellation.py polls the connection).
                enrolled = await run_until_disconnect(
                    request, voices.start_enrollment, req, wait=True, ticket=ticket
                )
            else:  # answered at once; the voice is kept whatever the client does next
                enrolled = await run_in_threadpool(
                    lambda: voices.start_enrollment(req, wait=False, ticket=ticket)
                )
        except Conflict:
            # A taken name (409) stored nothing: the phrase stays valid for the
            # retry under another name, not spent (answered "replayed" before).
            if spoken is not None:
                voices.consent_phrases.give_back(spoken.phrase)
            raise
    finally:
        ticket.release()  # harmless once the service released it
    out = VoiceOut.of(enrolled.record)
    return EnrolledVoiceOut(
        **out.model_dump(),
        job=JobOut.of(enrolled.refine_job) if enrolled.refine_job else None,
        report_job=JobOut.of(enrolled.report_job) if enrolled.report_job else None,
    )


def _check_typed_consent(consent: str, statement: str) -> None:
    """Typed consent: "true" and the statement agreed to, refused naming the field."""
    if not _consent_given(consent):
        raise InvalidInput(
            'cloning a voice needs the speaker\'s consent: send consent="true"',
            field="consent",
        )
    if not statement.strip():
        raise InvalidInput("consent_statement must not be empty", field="consent_statement")


def _spoken_consent_parts(
    request: Request, audio: UploadFile | None, phrase_id: str | None
) -> tuple[str, UploadFile] | None:
    """The enrollment's spoken consent as sent (phrase id, clip), None for
    typed consent; refused naming the field when spoken consent is required
    (consent_mode "spoken") or half sent."""
    required = request.app.state.settings.consent_mode == "spoken"
    if audio is None and not phrase_id:
        if required:
            raise InvalidInput(
                "this server takes spoken consent: send consent_audio, the speaker reading "
                "the phrase from POST /v1/consent/phrases, and its consent_phrase_id",
                field="consent_audio",
            )
        return None
    if not phrase_id:
        raise InvalidInput(
            "consent_audio needs the consent_phrase_id it reads", field="consent_phrase_id"
        )
    if audio is None:
        raise InvalidInput(
            "send the recording of the phrase as consent_audio", field="consent_audio"
        )
    return phrase_id, audio


async def _take_spoken_consent(
    voices: Any, owner: str, parts: tuple[str, UploadFile] | None
) -> Any:
    """The spoken consent with its phrase taken (single use; unknown, expired
    or replayed phrases are refused here), None for typed consent."""
    if parts is None:
        return None
    from voxclone.service.voices.spoken_consent import SpokenConsentInput

    phrase_id, audio = parts
    phrase = voices.consent_phrases.take(phrase_id, owner)
    return SpokenConsentInput(phrase=phrase, audio=await audio.read())


@router.post(
    "/v1/voices/blend",
    status_code=status.HTTP_201_CREATED,
    response_model=VoiceOut,
    summary="Save a voice blend ('alice(2)+clear_male(1)') as a library voice",
    description="The new voice holds the mixed style pack (and tone curve) of the blend as it "
    "is now and speaks like any library voice (cached by its id and version). Its parts are "
    "recorded in quality.blend; deleting one of them deletes this voice too.",
)
async def save_blend_voice(
    body: SaveBlendRequest, request: Request, principal: VoiceWriter
) -> VoiceOut:
    from voxclone.service.voices.saved_blends import save_blend

    runtime = get_runtime(request)
    record = await run_in_threadpool(
        lambda: save_blend(
            runtime.catalog,
            runtime.voice_store,
            name=body.name,
            expression=body.blend,
            owner=principal.owner,
            language=body.language,
        )
    )
    return VoiceOut.of(record)


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
    description="Saved blends made from the voice (POST /v1/voices/blend) hold data derived "
    "from it: they are deleted and purged with it and listed in derived_deleted. The answer "
    "carries a signed receipt of what was erased (receipt; no audio in it).",
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
    derived = [d.id for d in getattr(deleted, "derived", ())] or None
    receipt = await run_in_threadpool(issue_receipt, request, deleted)
    if getattr(deleted, "purge_pending", False):
        response.status_code = status.HTTP_202_ACCEPTED
        return DeletedOut(id=deleted.id, purge="pending", derived_deleted=derived, receipt=receipt)
    return DeletedOut(id=deleted.id, derived_deleted=derived, receipt=receipt)


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
    method = body.method if body else None
    job = await run_in_threadpool(voices.start_refine, voice_id, principal.owner, budget, method)
    return JobOut.of(job)
