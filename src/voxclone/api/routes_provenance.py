"""``POST /v1/provenance/detect``: whether an audio file carries voxclone's watermark.

Scope ``tts`` (whoever may make speech may check it). The upload is limited
like an enrollment recording (max_upload_mb, max_reference_seconds): bad
input is a 4xx naming the ``audio`` field and the limit.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Request, UploadFile
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from voxclone.api.auth import TTSCaller
from voxclone.service.provenance import detect

router = APIRouter(tags=["provenance"])


class DetectionOut(BaseModel):
    watermarked: bool = Field(description="PerTh's watermark was found")
    confidence: float = Field(description="the detector's score in [0, 1]; >= 0.5 is marked")
    payload: dict[str, str] | None = Field(
        description="which mark was found (PerTh's mark carries no bits); null when none"
    )


@router.post(
    "/v1/provenance/detect",
    summary="Check an audio file for voxclone's watermark",
    response_model=DetectionOut,
)
async def detect_watermark(
    request: Request,
    _principal: TTSCaller,
    audio: Annotated[UploadFile, File(description="the audio to check, any common format")],
) -> DetectionOut:
    settings = request.app.state.settings
    data = await audio.read()
    report = await run_in_threadpool(
        detect,
        data,
        max_bytes=int(settings.max_upload_mb * (1 << 20)),
        max_seconds=settings.max_reference_seconds,
    )
    return DetectionOut(
        watermarked=report.watermarked, confidence=report.confidence, payload=report.payload
    )
