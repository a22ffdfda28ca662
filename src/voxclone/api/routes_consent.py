"""Spoken consent (issue 49): the phrase a speaker reads for one enrollment,
and the consent clip a voice was enrolled with, for its owner."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from voxclone.api.auth import VoiceReader, VoiceWriter
from voxclone.api.deps import get_voice_service
from voxclone.errors import NotFound

router = APIRouter(tags=["voices"])


class ConsentPhraseOut(BaseModel):
    phrase_id: str
    text: str
    expires_at: str  # ISO-8601 UTC
    # Seconds left when this answer was made: a page counts down from it with
    # its own clock (the Date header is whole seconds and, from a busy event
    # loop, can lag more than one: the countdown showed 10:01 of 10 minutes).
    expires_in_s: float
    consent_mode: str


@router.post(
    "/v1/consent/phrases",
    response_model=ConsentPhraseOut,
    summary="A consent phrase for the speaker to read (spoken consent)",
    description="Single use, for the caller only, valid 10 minutes. Record the speaker "
    "reading `text` and send it to POST /v1/voices as `consent_audio` with "
    "`consent_phrase_id`. The last words are a code that changes every time, so an old "
    "recording cannot be sent again.",
)
async def issue_phrase(request: Request, principal: VoiceWriter) -> ConsentPhraseOut:
    phrase = get_voice_service(request).issue_consent_phrase(principal.owner)
    return ConsentPhraseOut(
        phrase_id=phrase.id,
        text=phrase.text,
        expires_at=datetime.fromtimestamp(phrase.expires_at, UTC).isoformat(),
        expires_in_s=round(max(0.0, phrase.expires_at - time.time()), 3),
        consent_mode=request.app.state.settings.consent_mode,
    )


def _consent_clip(request: Request, voice_id: str, owner: str) -> Any:
    return get_voice_service(request).consent_clip(voice_id, owner)


@router.get(
    "/v1/voices/{voice_id}/consent",
    summary="The spoken consent a voice was enrolled with (owner only)",
    description="The phrase, what the speech recognizer heard, the word error and the "
    "speaker similarities; 404 for a voice enrolled with typed consent.",
)
async def get_consent(voice_id: str, request: Request, principal: VoiceReader) -> dict[str, Any]:
    found = await run_in_threadpool(_consent_clip, request, voice_id, principal.owner)
    if found is None:
        raise NotFound("this voice was enrolled with typed consent: it has no consent clip")
    _, checked = found
    return {**checked, "audio_url": f"/v1/voices/{voice_id}/consent-audio"}


@router.get(
    "/v1/voices/{voice_id}/consent-audio",
    summary="The consent clip a voice was enrolled with, as uploaded (owner only)",
    response_class=Response,
)
async def get_consent_audio(voice_id: str, request: Request, principal: VoiceReader) -> Response:
    found = await run_in_threadpool(_consent_clip, request, voice_id, principal.owner)
    if found is None:
        raise NotFound("this voice was enrolled with typed consent: it has no consent clip")
    audio, _ = found
    return Response(
        audio,
        media_type=_sniff(audio),
        headers={"Cache-Control": "private, no-store"},
    )


def _sniff(audio: bytes) -> str:
    """The clip's type from its first bytes (it is kept as uploaded)."""
    if audio[:4] == b"RIFF":
        return "audio/wav"
    if audio[:4] == b"OggS":
        return "audio/ogg"
    if audio[:4] == b"fLaC":
        return "audio/flac"
    if audio[:4] == b"\x1aE\xdf\xa3":
        return "audio/webm"
    if audio[:3] == b"ID3" or audio[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio/mpeg"
    return "application/octet-stream"
