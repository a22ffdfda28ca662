"""``POST /v1/provenance/detect``: whether an audio file carries voxclone's
watermark, and what its C2PA manifest says (present, valid, signer).

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
from voxclone.config import Settings
from voxclone.runtime.signing_key import SigningCredential, load_existing
from voxclone.service.provenance import detect

router = APIRouter(tags=["provenance"])


class ManifestOut(BaseModel):
    present: bool = Field(description="a C2PA manifest is embedded (WAV, MP3, FLAC)")
    valid: bool | None = Field(
        description="its signature and hashes verify (the audio and the claim are as signed)"
    )
    ai_generated: bool | None = Field(
        description="it states a c2pa.created action of IPTC trainedAlgorithmicMedia"
    )
    generator: str | None = Field(description="the software that signed it, e.g. voxclone 0.1.0")
    model: str | None = Field(description="the model id it names")
    voice_ref: str | None = Field(description="an opaque voice reference (names no person)")
    signer: str | None = Field(
        description="whose key signed it; a self-signed key is on no C2PA trust list"
    )
    problems: list[str] = Field(description="C2PA validation codes that failed")


class DetectionOut(BaseModel):
    watermarked: bool = Field(description="PerTh's watermark was found")
    confidence: float = Field(description="the detector's score in [0, 1]; >= 0.5 is marked")
    payload: dict[str, str] | None = Field(
        description="which mark was found (PerTh's mark carries no bits) and, when it "
        "was read only at another playback speed (0.89x-1.13x), that speed as 'speed'; "
        "null when none"
    )
    manifest: ManifestOut = Field(description="the file's C2PA manifest, verified offline")


def own_credential(settings: Settings) -> SigningCredential | None:
    """This server's signing credential, if it has made or been given one."""
    try:
        return load_existing(
            settings.home, cert_path=settings.signing_cert, key_path=settings.signing_key
        )
    except (OSError, ValueError):
        return None


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
    runtime = getattr(request.app.state, "runtime", None)
    # The key lives in the home of the runtime that signs (it may serve
    # several apps, each with its own settings).
    own = own_credential(runtime.settings if runtime is not None else settings)
    data = await audio.read()
    report = await run_in_threadpool(
        detect,
        data,
        max_bytes=int(settings.max_upload_mb * (1 << 20)),
        max_seconds=settings.max_reference_seconds,
        own=own,
    )
    return DetectionOut(
        watermarked=report.watermarked,
        confidence=report.confidence,
        payload=report.payload,
        manifest=ManifestOut(**report.manifest.as_dict()),
    )
