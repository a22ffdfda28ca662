"""Native speech endpoint: ``POST /v1/tts`` (JSON or multipart with an inline reference)."""

from __future__ import annotations

import inspect
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from voxclone.api.auth import Principal, TTSCaller
from voxclone.api.body_guard import FORM_KINDS, MediaKind, json_body, media_kind, unsupported
from voxclone.api.cancellation import client_set_deadline, request_deadline, run_until_disconnect
from voxclone.api.deps import RuntimeDep, get_voice_service
from voxclone.api.routes_captions import captioned_response, captioned_stream
from voxclone.api.routes_voices import request_types
from voxclone.api.schemas import SpeechFields, TTSRequest
from voxclone.api.speech_headers import ssml_headers, voice_header
from voxclone.api.streaming import open_audio_stream
from voxclone.assembly import Runtime
from voxclone.errors import Forbidden, InvalidInput
from voxclone.runtime.admission import AdmissionTerms
from voxclone.runtime.keys import SCOPE_VOICES_WRITE
from voxclone.runtime.voice_store import OWNER_MAX_CHARS
from voxclone.service.speech.request import ResolvedRequest, SpeechRequest
from voxclone.synth.controls import SpeechControls

router = APIRouter(tags=["speech"])

REFERENCE_FIELD = "reference"
# Form fields that come with an inline reference: the same consent as enrollment.
CONSENT_FIELDS = ("consent", "consent_statement", "given_by")
# Most form fields a TTS request can carry; more is a malformed request.
_MAX_FORM_FIELDS = 32

_REQUEST_BODY_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/TTSRequest"}},
            "multipart/form-data": {
                "schema": {
                    "allOf": [{"$ref": "#/components/schemas/TTSRequest"}],
                    "properties": {
                        REFERENCE_FIELD: {
                            "type": "string",
                            "format": "binary",
                            "description": "reference clip to clone for this request only "
                            "(needs the voices:write scope and consent, as enrollment)",
                        },
                        "consent": {
                            "type": "string",
                            "description": 'with a reference: must be "true", the speaker agreed',
                        },
                        "consent_statement": {
                            "type": "string",
                            "description": "with a reference: the consent text agreed to",
                        },
                        "given_by": {
                            "type": "string",
                            "description": "with a reference: who consented (default: caller)",
                        },
                    },
                }
            },
        },
    }
}
_AUDIO_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "audio bytes", "content": {"audio/wav": {}, "audio/mpeg": {}}}
}


def speech_controls(body: SpeechFields) -> SpeechControls:
    """The controls of a native request body (live or a job: the same fields)."""
    return SpeechControls(
        speed=body.speed,
        pitch=body.pitch,
        energy=body.energy,
        emotion=body.emotion,
        intensity=body.intensity,
    )


def speech_request(
    body: SpeechFields,
    owner: str,
    voice_override: Any = None,
    *,
    unmarked: bool = False,
) -> SpeechRequest:
    """The service's request for a native body: live (``TTSRequest``, which
    also says whether its text is SSML) or a speech job (detected SSML only)."""
    return SpeechRequest(
        text=body.text,
        voice=body.voice,
        model=body.model,
        language=body.language,
        controls=speech_controls(body),
        format=body.format,
        sample_rate=body.sample_rate,
        owner=owner,
        voice_override=voice_override,
        ssml=body.ssml if isinstance(body, TTSRequest) else None,
        unmarked=unmarked,
    )


async def whole_file_response(request: Request, runtime: Runtime, req: ResolvedRequest) -> Response:
    """The whole file; stops rendering if the client leaves or the deadline passes."""
    deadline = request_deadline(request, runtime.settings.request_deadline_s)
    headers = await ssml_headers(runtime, req)
    # The service admits after the cache and the renders in flight: a hit or
    # an identical request is never refused; a render of its own is priced
    # as it will be spoken (503 when the work ahead would make it late).
    # A flood is refused here, before any thread, in microseconds (and the
    # request's lower bound reserved, so a flood arriving at once sees itself).
    with runtime.speech.admission(req, AdmissionTerms(deadline), stream=False) as terms:
        result = await run_until_disconnect(
            request, runtime.speech.synthesize, req, deadline=deadline, admission=terms
        )
    return Response(
        content=result.audio,
        media_type=result.content_type,
        headers={"X-Cache": result.cache, **headers, **voice_header(req)},
    )


async def streaming_response(request: Request, runtime: Runtime, req: ResolvedRequest) -> Response:
    """Chunked audio while it is synthesized; validation errors still become 4xx."""
    started = time.perf_counter()
    deadline = request_deadline(request, runtime.settings.request_deadline_s)
    headers = await ssml_headers(runtime, req)
    # Admitted by first audio, and by the whole stream when the client said
    # when it gives up (after the cache and identical streams in flight).
    terms = AdmissionTerms(
        deadline,
        must_finish=client_set_deadline(request),
        first_audio_s=request.app.state.settings.stream_first_audio_s,
    )
    with runtime.speech.admission(req, terms, stream=True) as checked:
        stream = await open_audio_stream(
            request,
            runtime.speech.stream,
            req,
            admission=checked,
            started=started,
            deadline=deadline,  # its first audio by it, or 504 before any header
        )
    # A fresh render is a generator; a cache hit is a ready iterator over one
    # piece, and the service's stream() does not say which tier answered.
    cache = "miss" if inspect.isgenerator(stream.chunks) else "hit"
    headers = {"X-Cache": cache, **headers, **voice_header(req)}
    return stream.response(stream.audio, media_type=stream.content_type, headers=headers)


async def _parse_body(
    request: Request,
) -> tuple[TTSRequest, bytes | None, dict[str, str]]:
    """(request, inline reference clip or None, consent fields sent with the clip)."""
    # The same classification as the body guard, which already refused the
    # types this route does not read and checked JSON bodies.
    content_type = request.headers.get("content-type")
    kind = media_kind(content_type)
    if kind in FORM_KINDS:
        form = await request.form(max_files=1, max_fields=_MAX_FORM_FIELDS)
        fields: dict[str, Any] = {}
        reference: bytes | None = None
        for key, value in form.multi_items():
            if isinstance(value, UploadFile):
                if key != REFERENCE_FIELD:
                    raise InvalidInput(
                        f"unexpected file field '{key[:40]}'; send the clip as '{REFERENCE_FIELD}'",
                        field=key[:40],
                    )
                reference = await value.read()
            else:
                fields[key] = value
        consent: dict[str, str] = {}
        if reference is not None:
            # Consent fields belong to the clip; without one they are unknown fields.
            consent = {k: str(fields.pop(k)) for k in CONSENT_FIELDS if k in fields}
        raw: Any = fields
    elif kind is MediaKind.JSON:
        raw = await json_body(request)
        reference = None
        consent = {}
    else:
        raise unsupported(content_type, FORM_KINDS | {MediaKind.JSON})
    try:
        return TTSRequest.model_validate(raw), reference, consent
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


async def _inline_voice(
    request: Request,
    principal: Principal,
    reference: bytes,
    consent: dict[str, str],
    model: str | None = None,
) -> Any:
    """Clone ``reference`` for this request: a clone like enrollment, with its checks."""
    if not request.app.state.settings.inline_references:
        raise Forbidden(
            "inline reference clips are turned off on this server; enroll the voice "
            "with POST /v1/voices and speak with its id",
            field=REFERENCE_FIELD,
        )
    if request.app.state.settings.consent_mode == "spoken":
        # An inline clip carries no spoken consent: it would bypass the check.
        raise Forbidden(
            "this server takes spoken consent: enroll the voice with POST /v1/voices "
            "(the speaker reading the consent phrase) and speak with its id",
            field=REFERENCE_FIELD,
        )
    if not principal.allows(SCOPE_VOICES_WRITE):
        raise Forbidden(
            f"an inline reference clones a voice: the API key needs the "
            f"'{SCOPE_VOICES_WRITE}' scope",
            field="scope",
            limit=SCOPE_VOICES_WRITE,
        )
    if consent.get("consent", "").strip().lower() != "true":
        raise InvalidInput(
            'cloning a voice needs the speaker\'s consent: send consent="true" and a '
            "consent_statement with the reference",
            field="consent",
        )
    if not consent.get("consent_statement", "").strip():
        raise InvalidInput("consent_statement must not be empty", field="consent_statement")
    given_by = consent.get("given_by", "").strip() or principal.owner
    if len(given_by) > OWNER_MAX_CHARS:
        # The same bound as an enrolled voice's consent record.
        raise InvalidInput(
            f"given_by is longer than {OWNER_MAX_CHARS} characters",
            field="given_by",
            limit=OWNER_MAX_CHARS,
        )
    consent_input, _ = request_types()
    voices = get_voice_service(request)
    given = consent_input(
        given=True,
        statement=consent["consent_statement"],
        given_by=given_by,
        client_address=request.client.host if request.client else None,
    )
    return await run_in_threadpool(voices.inline_voice, reference, principal.owner, given, model)


@router.post(
    "/v1/tts",
    summary="Speak text (JSON, or multipart with an inline reference clip)",
    openapi_extra=_REQUEST_BODY_DOC,
    responses=_AUDIO_RESPONSES,
    response_class=Response,
)
async def tts(
    request: Request,
    principal: TTSCaller,
    runtime: RuntimeDep,
) -> Response:
    body, reference, consent = await _parse_body(request)
    override = None
    if reference is not None:
        override = await _inline_voice(request, principal, reference, consent, body.model)
    # Resolved once from here on: the precheck, the SSML header, the cache
    # key, the price and the plan all read this one object.
    spoken = speech_request(body, principal.owner, override, unmarked=principal.unmarked)
    req = runtime.speech.request(spoken)
    if body.timestamps:
        if body.stream:
            return await captioned_stream(request, runtime, req)
        return await captioned_response(request, runtime, req, "json")
    if body.stream:
        return await streaming_response(request, runtime, req)
    return await whole_file_response(request, runtime, req)
