"""Provenance: is this audio voxclone's (PerTh-marked) output, and what does
its C2PA manifest say?

Detection decodes the upload as enrollment does (synth/audio/decode.py: the
same size and length limits, the same 4xx for what is not audio) and reads
PerTh's watermark from it (synth/audio/watermark.py), at the audio's own
speed and, when that finds nothing, at playback speeds 0.89x..1.13x
(synth/audio/watermark_search.py: a 0.9x or 1.1x re-upload hid the mark from
the plain read). PerTh's implicit mark carries no bits, so ``payload`` says
which mark was found (and ``speed``, the playback speed it was read at, when
not 1), not who made it.
The manifest (service/c2pa_manifest.py) is read from the upload's bytes as
they are and verified offline; ``own`` names this server's signing key.
"""

from __future__ import annotations

from dataclasses import dataclass

from voxclone.runtime.signing_key import SigningCredential
from voxclone.service.c2pa_manifest import ManifestReport, read_manifest
from voxclone.synth.audio import watermark, watermark_search
from voxclone.synth.audio.decode import decode_audio


@dataclass(frozen=True)
class ProvenanceReport:
    watermarked: bool
    confidence: float
    payload: dict[str, str] | None
    manifest: ManifestReport = ManifestReport(present=False)

    @property
    def ai_generated(self) -> bool:
        """Either mark says so: the watermark, or a valid manifest."""
        return self.watermarked or bool(self.manifest.valid and self.manifest.ai_generated)


def detect(
    data: bytes,
    *,
    max_bytes: int,
    max_seconds: float,
    own: SigningCredential | None = None,
) -> ProvenanceReport:
    samples, rate = decode_audio(data, max_bytes=max_bytes, max_seconds=max_seconds)
    found = watermark_search.detect(watermark.shared(), samples, rate)
    payload = None
    if found.watermarked:
        payload = {"watermark": watermark.WATERMARK_ID}
        if found.speed != 1.0:
            payload["speed"] = f"{found.speed:.2f}"
    manifest = read_manifest(data, own)
    return ProvenanceReport(found.watermarked, round(found.confidence, 4), payload, manifest)
