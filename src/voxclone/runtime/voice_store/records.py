"""What the voice library stores: the records, the limits on them, and the
:class:`VoiceStore` protocol every store (and test fake) implements, with
the :class:`PurgeJournal` it includes."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from voxclone.runtime.db import tables as t
from voxclone.synth.audio.tone import GRID_HZ

VoiceSource = Literal["instant", "refined", "builtin", "blend"]
VOICE_SOURCES: frozenset[str] = frozenset({"instant", "refined", "builtin", "blend"})
# A saved blend (service/blends.py) is derived from its parts' biometric data:
# its quality report lists them under quality["blend"]["parts"][i]["voice"],
# and deleting a part deletes the blend with it (``delete_with_derived``).
BLEND_SOURCE = "blend"

NAME_MAX_CHARS = 64
LANGUAGE_MAX_CHARS = 16
OWNER_MAX_CHARS = 128
LIST_MAX_LIMIT = 1000

DEFAULT_EMBEDDING_SHAPE: tuple[int, ...] = (256,)
# Voices stored before engines were recorded were all made for Kokoro; the
# schema migration gives them these values.
LEGACY_ENGINE = t.LEGACY_ENGINE
LEGACY_MODEL_ID = t.LEGACY_MODEL_ID
ENGINE_MAX_CHARS = 64
PROMPT_MAX_BYTES = 64 << 20
# Recording-tone vectors: the reference's long-term spectrum and the gain
# curve applied to the voice, one value per point of the tone grid.
DEFAULT_TONE_SHAPE: tuple[int, ...] = (GRID_HZ.size,)

# The value of a ``voice_reference_audio`` row whose recording is in the blob
# store. A real recording is never empty (decoding refuses it), so this cannot
# be mistaken for one; no schema change was needed to add blob storage.
IN_BLOB_STORE = b""

# A test hook called between the statements of a write transaction, with the
# name of the step just done. Production code leaves it unset.
StatementHook = Callable[[str], None]


@dataclass
class ConsentRecord:
    """Proof that the speaker agreed to be cloned (who, when, to what text)."""

    statement_sha256: str
    given_by: str
    given_at: str  # ISO-8601 UTC
    client_address: str | None = None


@dataclass
class VoiceRecord:
    """A voice with everything the synthesizer needs to speak with it.

    When passed to :meth:`VoiceStore.create`, an empty ``id``, ``created_at``
    or ``updated_at`` is filled in by the store and ``version`` starts at 1.
    ``reference_audio`` is kept only when the user asked for it.
    """

    id: str
    name: str
    language: str
    owner: str
    created_at: str
    updated_at: str
    version: int
    consent: ConsentRecord
    embedding: np.ndarray
    # Style engines: the float style array. Prompt engines: None (see ``prompt``).
    style: np.ndarray | None
    quality: dict[str, Any]
    source: str
    reference_audio: bytes | None = None
    # Optional recording-tone data: None for voices made without it.
    reference_spectrum: np.ndarray | None = None
    tone_db: np.ndarray | None = None
    # The engine (registry name) and weights the voice was made for; another
    # engine or model refuses it.
    engine: str = LEGACY_ENGINE
    model_id: str = LEGACY_MODEL_ID
    model_version: str = ""
    # Prompt engines: the engine's serialized conditioning (opaque bytes).
    prompt: bytes | None = None


@dataclass(frozen=True)
class VoiceSummary:
    """What a voice listing shows: metadata only, never arrays or audio."""

    id: str
    name: str
    language: str
    owner: str
    created_at: str
    updated_at: str
    version: int
    source: str
    quality: dict[str, Any] = field(default_factory=dict)
    has_reference_audio: bool = False
    engine: str = LEGACY_ENGINE
    model_id: str = LEGACY_MODEL_ID
    model_version: str = ""


class PurgeJournal(Protocol):
    """Purges owed of deleted voices' derived data (cached audio, blobs): a
    deletion owes its purge in its own transaction, and ``service/purge.py``
    ``CachePurger`` pays it."""

    def record_purge(self, voice_id: str) -> None: ...

    def pending_purges(self, limit: int = 1000) -> list[PendingPurge]: ...

    def purge_failed(self, voice_id: str, error: str) -> None: ...

    def purge_done(self, voice_id: str) -> None: ...


@runtime_checkable
class VoiceStore(PurgeJournal, Protocol):
    """Persistence of the voice library. ``owner=None`` means any owner (admin).

    The store is its own purge journal, so a voice is never gone without its
    purge owed; ``purge_blobs`` and ``existing_voice_ids`` serve that purge
    and the orphan sweep (``bootstrap.build_purger``).
    """

    def create(self, record: VoiceRecord) -> VoiceRecord: ...

    def get(
        self, voice_id: str, owner: str | None, *, include_reference_audio: bool = True
    ) -> VoiceRecord: ...

    def find_by_name(
        self, name: str, owner: str, *, include_reference_audio: bool = True
    ) -> VoiceRecord | None: ...

    def list(self, owner: str | None, limit: int = 100, offset: int = 0) -> list[VoiceSummary]: ...

    def update_style(
        self,
        voice_id: str,
        owner: str | None,
        *,
        style: np.ndarray,
        quality: dict[str, Any],
        source: str,
        embedding: np.ndarray | None = None,
        tone_db: np.ndarray | None = None,
        reference_spectrum: np.ndarray | None = None,
        if_version: int | None = None,
    ) -> VoiceRecord: ...

    def rename(self, voice_id: str, owner: str | None, name: str) -> VoiceRecord: ...

    def drop_reference_audio(self, voice_id: str, owner: str | None) -> bool: ...

    def delete(self, voice_id: str, owner: str | None) -> VoiceRecord: ...

    def delete_with_derived(self, voice_id: str, owner: str | None) -> Sequence[VoiceRecord]: ...

    def count(self, owner: str | None = None) -> int: ...

    def voice_version(self, voice_id: str) -> int | None: ...

    def kept_recordings(self, voice_ids: Collection[str]) -> int: ...

    def existing_voice_ids(self, voice_ids: Collection[str]) -> set[str]: ...

    def purge_blobs(self, voice_id: str) -> int: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class PendingPurge:
    voice_id: str
    requested_at: str
    attempts: int
    last_error: str | None


def utc_now_iso() -> str:
    """Current time as ISO-8601 UTC with microseconds; sorts lexically."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_voice_id() -> str:
    """Opaque id: ``v_`` + 16 url-safe random characters (96 bits)."""
    return "v_" + secrets.token_urlsafe(12)
