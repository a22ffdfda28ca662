"""A signed C2PA manifest and plain tags on every whole-file output (issue 49).

The manifest (c2pa-python, c2pa-rs underneath) says the audio was made by
an AI model: one ``c2pa.created`` action whose digital source type is IPTC's
``trainedAlgorithmicMedia``, the generator (voxclone and its version), the
model id and a voice reference that names no person (:func:`voice_reference`).
c2pa-rs embeds it in WAV (a ``C2PA`` RIFF chunk), MP3 (an ID3 GEOB frame) and
FLAC (an APPLICATION block); those three formats are signed. Opus (Ogg), AAC
(ADTS) and raw PCM have no C2PA binding in c2pa-rs: they get neither
manifest nor tags (synth/audio/metadata_tags.py), only the watermark.

Only whole files are signed: a manifest's hash covers the whole file, so a
stream (whose first bytes leave before the last are made) cannot carry one,
and first audio is never delayed by it. Signing offline: no timestamp
authority (the signing time is the claim's, unproven by a third party) and
no OCSP fetch. Measured on the dev host (2 cores at load ~11):
``import c2pa`` 0.06-0.09 s once (in a thread after start, never on the start
path), signing 15-25 ms for a 3-10 s file and 34-67 ms for 60 s, verifying
1-38 ms (3-11 ms signing when the host was quieter), ~3.5 KB per file.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tempfile
import threading
from dataclasses import dataclass
from typing import IO, Any

from voxclone.runtime.signing_key import SigningCredential
from voxclone.synth.audio.metadata_tags import TAGGED_FORMATS, PlainTags, write_tagged

GENERATOR = "voxclone"
AI_SOURCE_TYPE = "http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia"
# Not FLAC: c2pa-rs stores its manifest there in an ID3v2.4 tag in front of the
# stream, so the file no longer starts with "fLaC" and strict FLAC readers
# refuse it (found by tests/api/test_tts.py); FLAC keeps its Vorbis comments.
SIGNED_FORMATS = frozenset({"wav", "mp3"})
_MIME = {"wav": "audio/wav", "mp3": "audio/mpeg", "flac": "audio/flac"}
# Past this a job's file is signed from disk, not memory.
_SPOOL_BYTES = 32 << 20


@dataclass(frozen=True)
class OutputFacts:
    """What a manifest says about one output besides "AI-generated"."""

    model: str
    voice_ref: str


def voice_reference(voice_id: str, version: int, credential: SigningCredential) -> str:
    """An opaque, stable reference to one version of a voice: a clone named
    "alice" is not named, nor is its id given (which the owner may have shared
    with the name). The server that signed can find the voice again by
    recomputing this for its voices; no one else can."""
    secret = hashlib.sha256(b"voxclone voice ref\0" + credential.key_pem).digest()
    digest = hashlib.sha256(secret + f"{voice_id}\0{version}".encode()).hexdigest()
    return f"urn:voxclone:voice:{digest[:24]}"


class ManifestStamper:
    """Tags and signs whole files with one credential."""

    def __init__(self, credential: SigningCredential, version: str) -> None:
        self.credential = credential
        self._version = version
        self._import_lock = threading.Lock()

    def warm(self) -> None:
        """Import c2pa (0.06-0.09 s) off the request path; call from a thread."""
        with self._import_lock:
            import c2pa  # noqa: F401

    def stamps(self, fmt: str) -> bool:
        return fmt in SIGNED_FORMATS or fmt in TAGGED_FORMATS

    def stamp(self, data: bytes, fmt: str, facts: OutputFacts) -> bytes:
        out = io.BytesIO()
        self.stamp_into(io.BytesIO(data), out, fmt, facts)
        return out.getvalue()

    def stamp_into(self, src: IO[bytes], out: IO[bytes], fmt: str, facts: OutputFacts) -> None:
        """The whole file in ``src`` (format ``fmt``) into ``out``, tagged and
        signed where the format allows, copied unchanged otherwise."""
        if not self.stamps(fmt):
            src.seek(0)
            shutil.copyfileobj(src, out)
            return
        tags = PlainTags(
            software=f"{GENERATOR} {self._version}",
            comment=(
                f"AI-generated speech made by {GENERATOR} {self._version} "
                f"(model {facts.model}, voice {facts.voice_ref})"
            ),
        )
        if fmt not in SIGNED_FORMATS:
            write_tagged(src, out, fmt, tags)
            return
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as tagged:
            write_tagged(src, tagged, fmt, tags)
            tagged.seek(0)
            self._sign(tagged, out, fmt, facts)

    def _sign(self, src: IO[bytes], out: IO[bytes], fmt: str, facts: OutputFacts) -> None:
        with self._import_lock:
            import c2pa
        cred = self.credential
        info = c2pa.C2paSignerInfo(cred.algorithm, cred.chain_pem, cred.key_pem, None)
        # A Signer per file: c2pa's handles are not to be shared across threads,
        # and making one costs well under a millisecond.
        with c2pa.Signer.from_info(info) as signer, c2pa.Builder(self._manifest(facts)) as b:
            b.sign(signer, _MIME[fmt], src, out)

    def _manifest(self, facts: OutputFacts) -> dict[str, Any]:
        agent = {"name": GENERATOR, "version": self._version}
        return {
            "claim_generator_info": [agent],
            "title": "AI-generated speech",
            "assertions": [
                {
                    "label": "c2pa.actions.v2",
                    "data": {
                        "actions": [
                            {
                                "action": "c2pa.created",
                                "digitalSourceType": AI_SOURCE_TYPE,
                                "softwareAgent": agent,
                                "parameters": {
                                    "org.voxclone.model": facts.model,
                                    "org.voxclone.voice_ref": facts.voice_ref,
                                },
                            }
                        ]
                    },
                }
            ],
        }


@dataclass(frozen=True)
class ManifestReport:
    present: bool
    valid: bool | None = None
    ai_generated: bool | None = None
    generator: str | None = None
    model: str | None = None
    voice_ref: str | None = None
    signer: str | None = None
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "present": self.present,
            "valid": self.valid,
            "ai_generated": self.ai_generated,
            "generator": self.generator,
            "model": self.model,
            "voice_ref": self.voice_ref,
            "signer": self.signer,
            "problems": list(self.problems),
        }


# A self-signed chain is, by design, on no trust list: not a problem to report.
_NOT_PROBLEMS = frozenset({"signingCredential.untrusted"})


def sniff_format(data: bytes) -> str | None:
    """The signed format these bytes are, by their first bytes, or None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data[:4] == b"fLaC":
        return "flac"
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "mp3"
    return None


def read_manifest(data: bytes, own: SigningCredential | None = None) -> ManifestReport:
    """Read and verify the C2PA manifest in ``data`` (offline). ``own`` is
    this server's credential: a manifest it signed is said to be so."""
    fmt = sniff_format(data)
    if fmt is None:
        return ManifestReport(present=False)
    try:
        import c2pa
    except ImportError:  # served unsigned too (bootstrap.build_stamper)
        return ManifestReport(present=False, problems=("c2pa-python is not installed",))

    try:
        reader = c2pa.Reader.try_create(_MIME[fmt], io.BytesIO(data))
    except c2pa.C2paError as exc:
        # A manifest so damaged it cannot be parsed: present, and not valid.
        if not _mentions_manifest(data):
            return ManifestReport(present=False)
        return ManifestReport(present=True, valid=False, problems=(_short(str(exc)),))
    if reader is None:
        return ManifestReport(present=False)
    with reader:
        state = reader.get_validation_state()
        results = reader.get_validation_results() or {}
        manifest = reader.get_active_manifest() or {}
    failures = (results.get("activeManifest") or {}).get("failure") or []
    problems = tuple(f["code"] for f in failures if f.get("code") not in _NOT_PROBLEMS)
    created = _created_action(manifest)
    params = (created or {}).get("parameters") or {}
    generators = manifest.get("claim_generator_info") or [{}]
    gen = generators[0]
    generator = " ".join(str(gen[k]) for k in ("name", "version") if gen.get(k)) or None
    return ManifestReport(
        present=True,
        valid=state in ("Valid", "Trusted") and not problems,
        ai_generated=created is not None and created.get("digitalSourceType") == AI_SOURCE_TYPE,
        generator=generator,
        model=params.get("org.voxclone.model"),
        voice_ref=params.get("org.voxclone.voice_ref"),
        signer=_signer(manifest.get("signature_info") or {}, state, own),
        problems=problems,
    )


def _created_action(manifest: dict[str, Any]) -> dict[str, Any] | None:
    for assertion in manifest.get("assertions") or []:
        if str(assertion.get("label", "")).startswith("c2pa.actions"):
            for action in (assertion.get("data") or {}).get("actions") or []:
                if action.get("action") == "c2pa.created":
                    return action  # type: ignore[no-any-return]
    return None


def _signer(info: dict[str, Any], state: str | None, own: SigningCredential | None) -> str:
    who = " / ".join(str(info[k]) for k in ("issuer", "common_name") if info.get(k)) or "unknown"
    serial = str(info.get("cert_serial_number", ""))
    trusted = state == "Trusted"
    if own is not None and serial == str(own.serial):
        listed = "a trust-list signer" if trusted else "not a trust-list signer"
        return f"signed by this server's key {own.short_fingerprint} ({who}), {listed}"
    listed = "on the C2PA trust list" if trusted else "not a trust-list signer"
    return f"signed by {who} (certificate serial {serial}), {listed}"


def _mentions_manifest(data: bytes) -> bool:
    return b"c2pa" in data or b"C2PA" in data


def _short(message: str) -> str:
    return json.dumps(message)[1:-1][:200]
