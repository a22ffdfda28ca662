"""Provenance: is this audio voxclone's (PerTh-marked) output?

Detection decodes the upload as enrollment does (synth/audio/decode.py: the
same size and length limits, the same 4xx for what is not audio) and reads
PerTh's watermark from it (synth/audio/watermark.py). PerTh's implicit mark
carries no bits, so ``payload`` says which mark was found, not who made it.
"""

from __future__ import annotations

from dataclasses import dataclass

from voxclone.synth.audio import watermark
from voxclone.synth.audio.decode import decode_audio


@dataclass(frozen=True)
class ProvenanceReport:
    watermarked: bool
    confidence: float
    payload: dict[str, str] | None


def detect(data: bytes, *, max_bytes: int, max_seconds: float) -> ProvenanceReport:
    samples, rate = decode_audio(data, max_bytes=max_bytes, max_seconds=max_seconds)
    found = watermark.shared().detect(samples, rate)
    payload = {"watermark": watermark.WATERMARK_ID} if found.watermarked else None
    return ProvenanceReport(found.watermarked, round(found.confidence, 4), payload)
