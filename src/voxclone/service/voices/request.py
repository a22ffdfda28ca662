"""Enrollment's request and result values, and the checks made on a request
before anything is stored (consent, saved blends, the recordings sent)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from voxclone.errors import InvalidInput, UnknownModel, VoxcloneError
from voxclone.runtime.job_store import JobRecord
from voxclone.runtime.voice_store import BLEND_SOURCE, ConsentRecord, VoiceRecord, utc_now_iso
from voxclone.service.voices.spoken_consent import SpokenConsentInput
from voxclone.synth.audio.reference import ReferenceAudio
from voxclone.synth.engine.base import EngineCapabilities
from voxclone.synth.voice.quality_report import QualityReporter

STATEMENT_MAX_CHARS = 2000
# Recordings pooled into one voice per request (each is checked on its own limits).
MAX_CLIPS = 8


@dataclass(frozen=True)
class ConsentInput:
    given: bool
    statement: str
    given_by: str
    client_address: str | None = None


@dataclass(frozen=True)
class EnrollRequest:
    audio: bytes
    name: str
    owner: str
    consent: ConsentInput
    language: str = "en-us"
    keep_reference: bool = False
    refine: bool = False
    # Give the clone the reference recording's tone (long-term spectrum).
    match_tone: bool = True
    # The engine the voice is made for (registry name, model id or alias);
    # None = the service's default engine.
    model: str | None = None
    # More recordings of the same speaker, pooled with ``audio`` (weighted by speech).
    extra_audio: tuple[bytes, ...] = ()
    # Keep the clone even where the stock check hears a built-in about as close.
    keep_clone: bool = False
    # consent_mode "spoken": the issued phrase and the clip reading it, checked
    # against the recordings before any voice is made (service/voices/spoken_consent.py).
    spoken_consent: SpokenConsentInput | None = None


@dataclass(frozen=True)
class PromptCloning:
    """What enrollment needs from a ``prompt`` engine (wired by the composition root)."""

    capabilities: EngineCapabilities
    make_prompt: Callable[[np.ndarray, int], bytes]
    load_prompt: Callable[[bytes], object]
    # Speaker embedding of 16 kHz audio (stored with the voice, used by the report).
    embed: Callable[[np.ndarray], np.ndarray]
    # Speaks the report's test sentence with a loaded prompt; None: no report.
    reporter: QualityReporter | None = None


@dataclass(frozen=True)
class DeletedVoice:
    record: VoiceRecord
    purge_pending: bool  # cached audio not yet purged everywhere (journaled, retried)
    # Saved blends made from the voice, deleted and purged with it.
    derived: tuple[VoiceRecord, ...] = ()
    # What the deletion erased, for its receipt (service/deletion_receipt.py).
    deleted_at: str = ""
    recordings: int = 0  # kept reference recordings (the voice's and its blends')
    consent_clips: int | None = 0  # spoken-consent clips; None: the blob store was unreachable
    cache_entries: int | None = None  # None: not counted (purge pending, or no count given)
    jobs_revoked: tuple[str, ...] = ()  # speech jobs failed "voice_deleted", audio purged
    jobs_deleted: tuple[str, ...] = ()  # its refine/report jobs, stopped and deleted

    @property
    def id(self) -> str:
        return self.record.id


@dataclass(frozen=True)
class Enrollment:
    record: VoiceRecord  # the stored voice (version 1)
    # The background measurement of a ``wait=False`` enrollment (None: the
    # report came with ``record``).
    report_job: JobRecord | None
    refine_job: JobRecord | None  # when ``refine`` was asked


def refuse_blend(record: VoiceRecord, action: str) -> None:
    # A saved blend has no recording (and no speaker print) to work from.
    if record.source == BLEND_SOURCE:
        raise InvalidInput(
            f"cannot {action} a saved blend: it has no recording; save the blend again "
            "from changed parts instead",
            field="voice_id",
        )


def checked_consent(consent: ConsentInput) -> ConsentRecord:
    if consent.given is not True:
        raise InvalidInput(
            "consent is required: the speaker must agree to having their voice cloned",
            field="consent",
        )
    statement = (consent.statement or "").strip()
    if not statement or len(statement) > STATEMENT_MAX_CHARS:
        raise InvalidInput(
            f"a consent statement of 1 to {STATEMENT_MAX_CHARS} characters is required",
            field="consent.statement",
            limit=STATEMENT_MAX_CHARS,
        )
    return ConsentRecord(
        statement_sha256=hashlib.sha256(statement.encode("utf-8")).hexdigest(),
        given_by=consent.given_by,
        given_at=utc_now_iso(),
        client_address=consent.client_address,
    )


def load_references(
    load: Callable[[bytes], ReferenceAudio], clips: Sequence[bytes]
) -> list[ReferenceAudio]:
    """Each recording of a request decoded and checked by ``load``."""
    if not 1 <= len(clips) <= MAX_CLIPS:
        raise InvalidInput(
            f"send 1 to {MAX_CLIPS} recordings of the speaker",
            field="audio",
            limit=MAX_CLIPS,
            value=len(clips),
        )
    references = []
    for index, data in enumerate(clips):
        try:
            references.append(load(data))
        except VoxcloneError as exc:
            if len(clips) > 1:  # say which recording was refused
                exc.message = f"recording {index + 1}: {exc.message}"
                exc.args = (exc.message,)
            raise
    return references


def no_style_engine() -> UnknownModel:
    return UnknownModel("no style engine is loaded on this server", field="model")
