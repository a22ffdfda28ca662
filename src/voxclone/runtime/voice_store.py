"""Voice library store: who owns which cloned voice, with its consent record.

A voice is biometric data (DESIGN.md §1.5), so this module is strict about
three things:

* **Tenancy.** Every read and write takes an ``owner``. A voice of another
  owner behaves exactly like a missing one (``NotFound``), so ids cannot be
  probed. ``owner=None`` means an administrator acting on any voice.
* **Atomicity.** A voice and all of its rows (consent, arrays, optional
  reference audio) are written in one transaction: a crash in the middle of an
  enrollment leaves either the whole voice or nothing.
* **Complete deletion.** Deleting a voice removes every row that mentions it,
  and SQLite is run with ``secure_delete`` plus a WAL checkpoint so the bytes
  do not linger in free pages or in the write-ahead log. Its blobs (everything
  under ``voices/<id>/`` in the blob store) are deleted right after, and again
  by the journaled purge if the blob store could not be reached then.

Kept reference audio lives in the blob store when the store is given one
(``blobs``): the ``voice_reference_audio`` row of such a voice holds no bytes
(an empty value) and only says "the recording is at ``voices/<id>/reference``".
Voices written before (or by a store without blobs) keep their bytes in the row
and are read from it as always; nothing is moved behind the operator's back.

The voice repository: all queries of the voice library live in this module,
written with SQLAlchemy Core so the same code runs on the embedded SQLite file
and on PostgreSQL (``VOXCLONE_DATABASE_URL``); connections, transactions and
the schema history are in :mod:`voxclone.runtime.db`. Per dialect:

* SQLite takes the write lock up front (``BEGIN IMMEDIATE``); PostgreSQL locks
  the voice row (``SELECT ... FOR UPDATE``) where a read precedes a write;
* in both, the unique index on ``(owner, name_key)`` settles two creates of
  the same name racing (the loser gets ``Conflict``);
* SQLite runs with ``secure_delete`` and a WAL checkpoint after deletions;
  PostgreSQL reclaims deleted tuples with VACUUM, which the operator schedules.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from sqlalchemy import (
    ColumnElement,
    Connection,
    Table,
    and_,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from voxclone.errors import Conflict, InvalidInput, NotFound, VoiceChanged, VoxcloneError
from voxclone.runtime.blobs import BlobNotFound, BlobStore, voice_prefix, voice_reference_key
from voxclone.runtime.db import Database, upsert
from voxclone.runtime.db import schema as t
from voxclone.runtime.db.repository import Repository
from voxclone.synth.audio.tone import GRID_HZ

log = logging.getLogger(__name__)

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

# Arrays are stored as raw little-endian float32 bytes plus their shape, which
# any language (and PostgreSQL BYTEA) can read without numpy's .npy header.
_ARRAY_DTYPE = "<f4"

# A test hook called between the statements of a write transaction, with the
# name of the step just done. Production code leaves it unset.
StatementHook = Callable[[str], None]


# --------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------


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


@runtime_checkable
class VoiceStore(Protocol):
    """Persistence of the voice library. ``owner=None`` means any owner (admin)."""

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

    def close(self) -> None: ...


# --------------------------------------------------------------------------
# Small helpers shared by the stores
# --------------------------------------------------------------------------


def utc_now_iso() -> str:
    """Current time as ISO-8601 UTC with microseconds; sorts lexically."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_voice_id() -> str:
    """Opaque id: ``v_`` + 16 url-safe random characters (96 bits)."""
    return "v_" + secrets.token_urlsafe(12)


def validate_voice_name(name: str) -> str:
    """Return the stripped name, or raise InvalidInput if it is not usable."""
    if not isinstance(name, str):
        raise InvalidInput("name must be text", field="name", limit=NAME_MAX_CHARS)
    cleaned = name.strip()
    if not cleaned or len(cleaned) > NAME_MAX_CHARS:
        raise InvalidInput(
            f"name must be 1 to {NAME_MAX_CHARS} characters after trimming spaces",
            field="name",
            limit=NAME_MAX_CHARS,
        )
    if not cleaned.isprintable():
        raise InvalidInput(
            "name must contain only printable characters (no control characters or line breaks)",
            field="name",
            limit=NAME_MAX_CHARS,
        )
    return cleaned


def _name_key(name: str) -> str:
    # Names are unique per owner regardless of case: "Alice" and "alice" as two
    # different voices would only confuse whoever picks one by name.
    return name.casefold()


def _validate_short_text(value: object, field_name: str, max_chars: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > max_chars:
        raise InvalidInput(
            f"{field_name} must be 1 to {max_chars} characters",
            field=field_name,
            limit=max_chars,
        )
    return value


def _validate_source(source: str) -> str:
    if source not in VOICE_SOURCES:
        raise InvalidInput(
            f"source must be one of {', '.join(sorted(VOICE_SOURCES))}",
            field="source",
            value=str(source)[:32],
        )
    return source


def _validate_consent(consent: ConsentRecord) -> ConsentRecord:
    digest = consent.statement_sha256
    if not (
        isinstance(digest, str)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest.lower())
    ):
        raise InvalidInput(
            "consent statement hash must be 64 hexadecimal characters (SHA-256)",
            field="consent",
        )
    _validate_short_text(consent.given_by, "consent.given_by", OWNER_MAX_CHARS)
    try:
        datetime.fromisoformat(consent.given_at)
    except (TypeError, ValueError):
        raise InvalidInput(
            "consent time must be an ISO-8601 timestamp", field="consent.given_at"
        ) from None
    return ConsentRecord(digest.lower(), consent.given_by, consent.given_at, consent.client_address)


def _json_default(value: object) -> Any:
    # Quality reports are often built from numpy scalars; store them as plain JSON.
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _blend_part_ids(quality_json: str | None) -> set[str]:
    """The voice ids a saved blend's quality report names as its parts."""
    try:
        blend = json.loads(quality_json or "{}").get("blend") or {}
        return {str(p["voice"]) for p in blend.get("parts", []) if isinstance(p, dict)}
    except (ValueError, AttributeError, KeyError, TypeError):
        return set()


def _quality_to_json(quality: dict[str, Any]) -> str:
    if not isinstance(quality, dict):
        raise InvalidInput("quality report must be a JSON object", field="quality")
    try:
        return json.dumps(quality, default=_json_default, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError):
        raise InvalidInput(
            "quality report must contain only JSON values (no NaN or infinity)", field="quality"
        ) from None


def _checked_array(value: np.ndarray, field_name: str, shape: tuple[int, ...]) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind != "f":
        raise InvalidInput(f"{field_name} must be a float array", field=field_name)
    array = np.ascontiguousarray(array, dtype=np.float32)
    if array.shape != shape:
        raise InvalidInput(
            f"{field_name} must have shape {list(shape)}, got {list(array.shape)}",
            field=field_name,
            limit=list(shape),
        )
    if not np.isfinite(array).all():
        raise InvalidInput(f"{field_name} must contain only finite numbers", field=field_name)
    return array


def _copy_or_none(array: np.ndarray | None) -> np.ndarray | None:
    return None if array is None else array.copy()


def _encode_array(array: np.ndarray) -> tuple[bytes, str]:
    return array.astype(_ARRAY_DTYPE, copy=False).tobytes(), json.dumps(list(array.shape))


def _decode_array(data: bytes, shape_json: str) -> np.ndarray:
    shape = tuple(int(n) for n in json.loads(shape_json))
    expected = int(np.prod(shape, dtype=np.int64)) * 4
    if len(data) != expected:
        raise VoxcloneError("stored voice data is corrupted; delete and re-create the voice")
    # frombuffer is read-only and tied to the bytes object; copy to a normal array.
    return np.frombuffer(data, dtype=_ARRAY_DTYPE).reshape(shape).astype(np.float32)


def _check_page(limit: int, offset: int) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= LIST_MAX_LIMIT:
        raise InvalidInput(
            f"limit must be between 1 and {LIST_MAX_LIMIT}", field="limit", limit=LIST_MAX_LIMIT
        )
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInput("offset must be 0 or more", field="offset")


# --------------------------------------------------------------------------
# The voice repository on SQLAlchemy Core (SQLite or PostgreSQL)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class PendingPurge:
    voice_id: str
    requested_at: str
    attempts: int
    last_error: str | None


# Every table holding a voice's data, child tables first. Deletion walks this
# list explicitly rather than trusting ON DELETE CASCADE alone.
_VOICE_CHILD_TABLES: tuple[Table, ...] = (
    t.voice_reference_audio,
    t.voice_prompts,
    t.voice_arrays,
    t.voice_consents,
)

_V = t.voices.c

_SUMMARY_COLUMNS = (
    _V.id,
    _V.name,
    _V.language,
    _V.owner,
    _V.created_at,
    _V.updated_at,
    _V.version,
    _V.source,
    _V.quality_json,
    exists().where(t.voice_reference_audio.c.voice_id == _V.id).label("has_reference_audio"),
    _V.engine,
    _V.model_id,
    _V.model_version,
)


def _voice_where(voice_id: str, owner: str | None) -> ColumnElement[bool]:
    # The owner filter is added in Python rather than "(:owner IS NULL OR owner
    # = :owner)", which PostgreSQL cannot type and which defeats the index.
    clause = _V.id == voice_id
    return clause if owner is None else and_(clause, _V.owner == owner)


def _summary_from_row(row: Sequence[Any]) -> VoiceSummary:
    return VoiceSummary(
        id=row[0],
        name=row[1],
        language=row[2],
        owner=row[3],
        created_at=row[4],
        updated_at=row[5],
        version=int(row[6]),
        source=row[7],
        quality=json.loads(row[8]),
        has_reference_audio=bool(row[9]),
        engine=row[10],
        model_id=row[11],
        model_version=row[12],
    )


def _not_found(voice_id: str) -> NotFound:
    # Same message whether the voice is missing or belongs to someone else.
    return NotFound(f"voice {voice_id[:40]!r} not found", field="voice_id")


def _name_taken(name: str) -> Conflict:
    return Conflict(f"you already have a voice named {name!r}", field="name")


class SqlVoiceStore(Repository):
    """The voice library in the voxclone database (SQLite file or PostgreSQL).

    ``database`` is a shared :class:`Database` (the composition root's), or a
    path / URL the store opens (and closes) itself. ``style_shapes`` maps each
    engine voices may be written for to its ``EngineCapabilities.style_shape``
    (None: a prompt engine, whose voices carry an opaque prompt instead of a
    style array). Writing a voice for an engine not in the map is refused;
    reading never needs it.
    """

    def __init__(
        self,
        database: Database | Path | str,
        *,
        style_shapes: Mapping[str, tuple[int, ...] | None] | None = None,
        embedding_shape: tuple[int, ...] = DEFAULT_EMBEDDING_SHAPE,
        tone_shape: tuple[int, ...] = DEFAULT_TONE_SHAPE,
        statement_hook: StatementHook | None = None,
        blobs: BlobStore | None = None,
    ) -> None:
        super().__init__(database)
        # Where new voices keep their reference audio (None: in the database row).
        self._blobs = blobs
        self._embedding_shape = tuple(embedding_shape)
        self._style_shapes: dict[str, tuple[int, ...] | None] = {
            name: None if shape is None else tuple(shape)
            for name, shape in (style_shapes or {}).items()
        }
        self._tone_shape = tuple(tone_shape)
        self._hook = statement_hook

    @property
    def blobs(self) -> BlobStore | None:
        return self._blobs

    # -- writes -------------------------------------------------------------

    def create(self, record: VoiceRecord) -> VoiceRecord:
        name = validate_voice_name(record.name)
        owner = _validate_short_text(record.owner, "owner", OWNER_MAX_CHARS)
        language = _validate_short_text(record.language, "language", LANGUAGE_MAX_CHARS)
        source = _validate_source(record.source)
        consent = _validate_consent(record.consent)
        embedding = _checked_array(record.embedding, "embedding", self._embedding_shape)
        engine, model_id, model_version = self._checked_model(record)
        style, prompt = self._checked_conditioning(engine, record.style, record.prompt)
        tone_arrays = self._checked_tone(record.reference_spectrum, record.tone_db)
        quality_json = _quality_to_json(record.quality)
        if record.reference_audio is not None and not isinstance(record.reference_audio, bytes):
            raise InvalidInput("reference audio must be bytes", field="reference_audio")

        voice_id = record.id or new_voice_id()
        now = utc_now_iso()
        created_at = record.created_at or now
        updated_at = record.updated_at or created_at

        stored_audio = record.reference_audio
        in_blobs = stored_audio is not None and self._blobs is not None
        if in_blobs:
            assert self._blobs is not None and stored_audio is not None
            # The blob first: a failing blob store fails the enrollment before any
            # row exists. An explicit id that is taken must not overwrite the blob
            # of the voice that has it.
            if record.id:
                with self._db.read() as conn:
                    if conn.execute(select(_V.id).where(_V.id == voice_id)).first():
                        raise Conflict("a voice with this id already exists", field="id")
            try:
                reference_key = voice_reference_key(voice_id)
            except ValueError:
                raise InvalidInput("this voice id cannot name a blob", field="id") from None
            self._blobs.put(reference_key, stored_audio, content_type="application/octet-stream")
            stored_audio = IN_BLOB_STORE
        try:
            with self._db.write() as conn:
                if conn.execute(select(_V.id).where(_V.id == voice_id)).first():
                    raise Conflict("a voice with this id already exists", field="id")
                self._ensure_name_free(conn, owner, name, except_id=None)
                # Two creates of one name racing past the check above: the
                # unique index on (owner, name_key) stops the second one here.
                conn.execute(
                    insert(t.voices).values(
                        id=voice_id,
                        owner=owner,
                        name=name,
                        name_key=_name_key(name),
                        language=language,
                        created_at=created_at,
                        updated_at=updated_at,
                        version=1,
                        source=source,
                        quality_json=quality_json,
                        engine=engine,
                        model_id=model_id,
                        model_version=model_version,
                    )
                )
                self._step("voice")
                conn.execute(
                    insert(t.voice_consents).values(
                        voice_id=voice_id,
                        statement_sha256=consent.statement_sha256,
                        given_by=consent.given_by,
                        given_at=consent.given_at,
                        client_address=consent.client_address,
                    )
                )
                self._step("consent")
                self._write_array(conn, voice_id, "embedding", embedding)
                self._step("embedding")
                if style is not None:
                    self._write_array(conn, voice_id, "style", style)
                    self._step("style")
                if prompt is not None:
                    conn.execute(insert(t.voice_prompts).values(voice_id=voice_id, data=prompt))
                    self._step("prompt")
                for kind, array in tone_arrays.items():
                    self._write_array(conn, voice_id, kind, array)
                    self._step(kind)
                if stored_audio is not None:
                    conn.execute(
                        insert(t.voice_reference_audio).values(
                            voice_id=voice_id, audio=stored_audio
                        )
                    )
                    self._step("reference_audio")
        except BaseException as exc:
            if in_blobs:
                self._forget_blobs(voice_id)  # the voice was never stored
            if isinstance(exc, IntegrityError):
                raise _name_taken(name) from None
            raise

        return VoiceRecord(
            id=voice_id,
            name=name,
            language=language,
            owner=owner,
            created_at=created_at,
            updated_at=updated_at,
            version=1,
            consent=consent,
            embedding=embedding.copy(),
            style=_copy_or_none(style),
            quality=json.loads(quality_json),
            source=source,
            reference_audio=record.reference_audio,
            reference_spectrum=_copy_or_none(tone_arrays.get("reference_spectrum")),
            tone_db=_copy_or_none(tone_arrays.get("tone")),
            engine=engine,
            model_id=model_id,
            model_version=model_version,
            prompt=prompt,
        )

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
    ) -> VoiceRecord:
        """Replace the style (and optionally embedding, tone curve and the
        reference's long-term spectrum, e.g. after a recording was added); bump ``version``.

        The version is what audio caches key on, so audio made with the old
        style is never served for the new one. With ``if_version`` the write
        happens only while the voice is still at that version (else
        :class:`VoiceChanged`): a background job computed from one version must
        not overwrite a recording added meanwhile.
        """
        with self._db.read() as conn:
            engine = conn.execute(select(_V.engine).where(_voice_where(voice_id, owner))).scalar()
        if engine is None:
            raise _not_found(voice_id)
        checked_style, _ = self._checked_conditioning(engine, style, None)
        assert checked_style is not None
        checked_embedding = (
            None
            if embedding is None
            else _checked_array(embedding, "embedding", self._embedding_shape)
        )
        tone_arrays = self._checked_tone(reference_spectrum, tone_db)
        quality_json = _quality_to_json(quality)
        _validate_source(source)
        where = _voice_where(voice_id, owner)
        if if_version is not None:
            where = and_(where, _V.version == if_version)
        with self._db.write() as conn:
            result = conn.execute(
                update(t.voices)
                .where(where)
                .values(
                    version=_V.version + 1,
                    updated_at=utc_now_iso(),
                    quality_json=quality_json,
                    source=source,
                )
            )
            if result.rowcount == 0:
                now = conn.execute(select(_V.version).where(_voice_where(voice_id, owner))).scalar()
                if now is None:
                    raise _not_found(voice_id)
                raise VoiceChanged(
                    f"voice {voice_id} is at version {now} now, not {if_version}",
                    field="voice",
                    value=int(now),
                )
            self._step("voice")
            self._write_array(conn, voice_id, "style", checked_style, replace=True)
            self._step("style")
            if checked_embedding is not None:
                self._write_array(conn, voice_id, "embedding", checked_embedding, replace=True)
                self._step("embedding")
            for kind, array in tone_arrays.items():
                self._write_array(conn, voice_id, kind, array, replace=True)
                self._step(kind)
        return self.get(voice_id, owner)

    def rename(self, voice_id: str, owner: str | None, name: str) -> VoiceRecord:
        cleaned = validate_voice_name(name)
        try:
            with self._db.write() as conn:
                row_owner = self._lock_voice(conn, voice_id, owner)
                self._ensure_name_free(conn, row_owner, cleaned, except_id=voice_id)
                conn.execute(
                    update(t.voices)
                    .where(_V.id == voice_id)
                    .values(name=cleaned, name_key=_name_key(cleaned), updated_at=utc_now_iso())
                )
        except IntegrityError:
            raise _name_taken(cleaned) from None
        return self.get(voice_id, owner)

    def drop_reference_audio(self, voice_id: str, owner: str | None) -> bool:
        """Forget the kept reference recording; True if there was one."""
        with self._db.write() as conn:
            self._lock_voice(conn, voice_id, owner)
            result = conn.execute(
                delete(t.voice_reference_audio).where(
                    t.voice_reference_audio.c.voice_id == voice_id
                )
            )
            dropped = result.rowcount > 0
        if dropped:
            self._db.checkpoint()
            if self._blobs is not None:
                # Not owed to the purge journal: a failure here is reported (503)
                # and the user can drop it again; the row is already gone, though,
                # so the blob is deleted again with the voice in any case.
                self._blobs.delete_prefix(voice_reference_key(voice_id))
        return dropped

    def delete(self, voice_id: str, owner: str | None) -> VoiceRecord:
        """Delete the voice and every row derived from it; return what was deleted.

        Callers use the returned record (id, version, owner) to purge audio
        caches and other artifacts made with the voice. Saved blends made from
        it are deleted too (``delete_with_derived`` also returns them).
        """
        return self.delete_with_derived(voice_id, owner)[0]

    def delete_with_derived(self, voice_id: str, owner: str | None) -> Sequence[VoiceRecord]:
        """Delete the voice and the saved blends derived from it (transitively: a
        blend of a blend goes too), in one transaction; the voice's record first.

        A saved blend holds a mix of its parts' style packs and tone curves,
        i.e. data derived from their recordings (DESIGN.md §1.5): it must not
        outlive a part. Every deleted voice owes its own journaled purge.
        """
        with self._db.write() as conn:
            # Lock first: of two concurrent deletes one wins, the other gets NotFound.
            self._lock_voice(conn, voice_id, owner)
            record = self._load(conn, voice_id, owner, include_reference_audio=False)
            doomed = [record]
            doomed += [
                self._load(conn, blend_id, record.owner, include_reference_audio=False)
                for blend_id in self._derived_blend_ids(conn, voice_id, record.owner)
            ]
            for victim in doomed:
                for table in _VOICE_CHILD_TABLES:
                    conn.execute(delete(table).where(table.c.voice_id == victim.id))
                    self._step(f"delete_{table.name}")
                conn.execute(delete(t.voices).where(_V.id == victim.id))
                # Same transaction: the voice cannot be gone without its purge owed.
                self._journal_purge(conn, victim.id)
        # Push the zeroed pages out of the WAL so no copy of the deleted voice
        # survives in the log file either.
        self._db.checkpoint()
        # Then its blobs. The purge journal row written above stays until a
        # purge that includes the blobs (``purge_blobs``) succeeds, so an
        # unreachable blob store delays this but cannot make it forgotten.
        for victim in doomed:
            self._forget_blobs(victim.id)
        return doomed

    def derived_blends(self, voice_id: str, owner: str) -> list[str]:
        """Ids of the owner's saved blends made (transitively) from ``voice_id``."""
        with self._db.read() as conn:
            return self._derived_blend_ids(conn, voice_id, owner)

    @staticmethod
    def _derived_blend_ids(conn: Connection, voice_id: str, owner: str) -> list[str]:
        # Parts are always the owner's own voices (or built-ins), so only the
        # owner's blends can be derived from ``voice_id``; few rows per owner.
        rows = conn.execute(
            select(_V.id, _V.quality_json).where(_V.owner == owner, _V.source == BLEND_SOURCE)
        ).all()
        parts_of = {str(row[0]): _blend_part_ids(row[1]) for row in rows}
        found: list[str] = []
        frontier = [voice_id]
        while frontier:
            part = frontier.pop()
            for blend_id, parts in parts_of.items():
                if part in parts and blend_id not in found and blend_id != voice_id:
                    found.append(blend_id)
                    frontier.append(blend_id)
        return found

    def existing_voice_ids(self, voice_ids: Collection[str]) -> set[str]:
        """Which of ``voice_ids`` are still in the library (any owner)."""
        wanted = list(voice_ids)
        found: set[str] = set()
        with self._db.read() as conn:
            for start in range(0, len(wanted), 500):  # bounded IN lists
                batch = wanted[start : start + 500]
                rows = conn.execute(select(t.voices.c.id).where(t.voices.c.id.in_(batch)))
                found.update(row[0] for row in rows)
        return found

    def voice_version(self, voice_id: str) -> int | None:
        """The voice's version now (any owner), None once it is deleted: what a
        render asks before keeping audio made with it (runtime/cache_guard.py)."""
        with self._db.read() as conn:
            found = conn.execute(select(_V.version).where(_V.id == voice_id)).scalar()
        return None if found is None else int(found)

    def purge_blobs(self, voice_id: str) -> int:
        """Delete every blob of ``voice_id`` (``voices/<id>/``); how many were there.

        Raises when the blob store cannot be reached: the journaled purge calls
        this and keeps the debt for a retry.
        """
        if self._blobs is None:
            return 0
        try:
            prefix = voice_prefix(voice_id)
        except ValueError:  # an id no blob key can hold: nothing was ever stored
            return 0
        return self._blobs.delete_prefix(prefix)

    def _forget_blobs(self, voice_id: str) -> None:
        try:
            self.purge_blobs(voice_id)
        except Exception as exc:  # the journaled purge retries it
            log.warning("blob purge of a deleted voice postponed: %s", type(exc).__name__)

    # -- purge journal ------------------------------------------------------

    def record_purge(self, voice_id: str) -> None:
        """Owe a purge of the caches for ``voice_id`` (deleted voices record it themselves)."""
        with self._db.write() as conn:
            self._journal_purge(conn, voice_id)

    def _journal_purge(self, conn: Connection, voice_id: str) -> None:
        now = utc_now_iso()
        conn.execute(
            upsert(self._db, t.purge_journal)
            .values(voice_id=voice_id, requested_at=now, attempts=0)
            .on_conflict_do_update(index_elements=["voice_id"], set_={"requested_at": now})
        )

    def pending_purges(self, limit: int = 1000) -> list[PendingPurge]:
        p = t.purge_journal.c
        with self._db.read() as conn:
            rows = conn.execute(
                select(p.voice_id, p.requested_at, p.attempts, p.last_error)
                .order_by(p.requested_at, p.voice_id)
                .limit(limit)
            ).all()
        return [PendingPurge(r[0], r[1], int(r[2]), r[3]) for r in rows]

    def purge_failed(self, voice_id: str, error: str) -> None:
        p = t.purge_journal.c
        with self._db.write() as conn:
            conn.execute(
                update(t.purge_journal)
                .where(p.voice_id == voice_id)
                .values(attempts=p.attempts + 1, last_error=error[:200])
            )

    def purge_done(self, voice_id: str) -> None:
        with self._db.write() as conn:
            conn.execute(delete(t.purge_journal).where(t.purge_journal.c.voice_id == voice_id))

    # -- reads --------------------------------------------------------------

    def get(
        self, voice_id: str, owner: str | None, *, include_reference_audio: bool = True
    ) -> VoiceRecord:
        with self._db.read() as conn:
            record = self._load(conn, voice_id, owner, include_reference_audio)
        return self._with_blob_audio(record)

    def find_by_name(
        self, name: str, owner: str, *, include_reference_audio: bool = True
    ) -> VoiceRecord | None:
        """The owner's voice with this name (case-insensitive), or None."""
        key = _name_key(name.strip()) if isinstance(name, str) else ""
        if not key:
            return None
        with self._db.read() as conn:
            voice_id = conn.execute(
                select(_V.id).where(_V.owner == owner, _V.name_key == key)
            ).scalar()
            if voice_id is None:
                return None
            record = self._load(conn, voice_id, owner, include_reference_audio)
        return self._with_blob_audio(record)

    def _with_blob_audio(self, record: VoiceRecord) -> VoiceRecord:
        """Fetch a reference kept in the blob store, outside any database transaction."""
        if record.reference_audio is None or record.reference_audio != IN_BLOB_STORE:
            return record
        if self._blobs is None:
            raise VoxcloneError(
                "this voice's reference audio is in the blob store, which this process "
                "was not given (configure the same VOXCLONE_S3_* settings as the server)"
            )
        try:
            record.reference_audio = self._blobs.get(voice_reference_key(record.id))
        except BlobNotFound:
            # Lost with a bucket or purged by hand: the voice still speaks.
            log.warning("kept reference audio of a voice is missing from the blob store")
            record.reference_audio = None
        return record

    def list(self, owner: str | None, limit: int = 100, offset: int = 0) -> list[VoiceSummary]:
        """Voices oldest first, metadata only."""
        _check_page(limit, offset)
        query = select(*_SUMMARY_COLUMNS)
        if owner is not None:
            query = query.where(_V.owner == owner)
        query = query.order_by(_V.created_at, _V.id).limit(limit).offset(offset)
        with self._db.read() as conn:
            rows = conn.execute(query).all()
        return [_summary_from_row(row) for row in rows]

    def count(self, owner: str | None = None) -> int:
        query = select(func.count()).select_from(t.voices)
        if owner is not None:
            query = query.where(_V.owner == owner)
        with self._db.read() as conn:
            return int(conn.execute(query).scalar_one())

    # -- internals ----------------------------------------------------------

    def _checked_model(self, record: VoiceRecord) -> tuple[str, str, str]:
        engine = _validate_short_text(record.engine, "engine", ENGINE_MAX_CHARS)
        if engine not in self._style_shapes:
            known = sorted(self._style_shapes)
            raise InvalidInput(
                f"voices cannot be stored for engine {engine[:32]!r}; known: {', '.join(known)}",
                field="engine",
                limit=known,
            )
        model_id = _validate_short_text(record.model_id, "model_id", ENGINE_MAX_CHARS)
        version = record.model_version
        if not isinstance(version, str) or len(version) > ENGINE_MAX_CHARS:
            raise InvalidInput("model_version must be short text", field="model_version")
        return engine, model_id, version

    def _checked_conditioning(
        self, engine: str, style: np.ndarray | None, prompt: bytes | None
    ) -> tuple[np.ndarray | None, bytes | None]:
        """(style, prompt) as the engine's clone method wants them: exactly one is set."""
        if engine not in self._style_shapes:
            raise InvalidInput(f"unknown engine {engine[:32]!r}", field="engine")
        shape = self._style_shapes[engine]
        if shape is None:  # a prompt engine
            if style is not None:
                raise InvalidInput(
                    f"engine {engine!r} takes a reference prompt, not a style array", field="style"
                )
            if not isinstance(prompt, bytes) or not prompt or len(prompt) > PROMPT_MAX_BYTES:
                raise InvalidInput(
                    f"a prompt voice needs 1 byte to {PROMPT_MAX_BYTES >> 20} MiB of prompt data",
                    field="prompt",
                    limit=PROMPT_MAX_BYTES,
                )
            return None, prompt
        if prompt is not None:
            raise InvalidInput(
                f"engine {engine!r} takes a style array, not a reference prompt", field="prompt"
            )
        if style is None:
            raise InvalidInput(
                "a style voice needs a style array", field="style", limit=list(shape)
            )
        return _checked_array(style, "style", shape), None

    def _checked_tone(
        self, reference_spectrum: np.ndarray | None, tone_db: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        """Validated optional tone arrays, keyed by their ``voice_arrays`` kind."""
        checked: dict[str, np.ndarray] = {}
        if reference_spectrum is not None:
            checked["reference_spectrum"] = _checked_array(
                reference_spectrum, "reference_spectrum", self._tone_shape
            )
        if tone_db is not None:
            checked["tone"] = _checked_array(tone_db, "tone_db", self._tone_shape)
        return checked

    def _step(self, name: str) -> None:
        if self._hook is not None:
            self._hook(name)

    @staticmethod
    def _lock_voice(conn: Connection, voice_id: str, owner: str | None) -> str:
        """Lock the voice row for this transaction (PostgreSQL); return its owner.

        SQLite already holds the database write lock (BEGIN IMMEDIATE), and
        SQLAlchemy renders no FOR UPDATE there.
        """
        row_owner = conn.execute(
            select(_V.owner).where(_voice_where(voice_id, owner)).with_for_update()
        ).scalar()
        if row_owner is None:
            raise _not_found(voice_id)
        return str(row_owner)

    @staticmethod
    def _ensure_name_free(conn: Connection, owner: str, name: str, except_id: str | None) -> None:
        found = conn.execute(
            select(_V.id).where(_V.owner == owner, _V.name_key == _name_key(name))
        ).scalar()
        if found is not None and found != except_id:
            raise _name_taken(name)

    def _write_array(
        self,
        conn: Connection,
        voice_id: str,
        kind: str,
        array: np.ndarray,
        *,
        replace: bool = False,
    ) -> None:
        data, shape_json = _encode_array(array)
        values = {"voice_id": voice_id, "kind": kind, "shape_json": shape_json, "data": data}
        if replace:
            # Upsert: a voice stored before this kind of array existed has no row yet.
            conn.execute(
                upsert(self._db, t.voice_arrays)
                .values(**values)
                .on_conflict_do_update(
                    index_elements=["voice_id", "kind"],
                    set_={"shape_json": shape_json, "data": data},
                )
            )
        else:
            conn.execute(insert(t.voice_arrays).values(**values))

    @staticmethod
    def _load(
        conn: Connection,
        voice_id: str,
        owner: str | None,
        include_reference_audio: bool,
    ) -> VoiceRecord:
        row = conn.execute(
            select(
                _V.id,
                _V.name,
                _V.language,
                _V.owner,
                _V.created_at,
                _V.updated_at,
                _V.version,
                _V.source,
                _V.quality_json,
                _V.engine,
                _V.model_id,
                _V.model_version,
            ).where(_voice_where(voice_id, owner))
        ).first()
        if row is None:
            raise _not_found(voice_id)
        c = t.voice_consents.c
        consent_row = conn.execute(
            select(c.statement_sha256, c.given_by, c.given_at, c.client_address).where(
                c.voice_id == voice_id
            )
        ).first()
        a = t.voice_arrays.c
        arrays = {
            kind: _decode_array(bytes(data), shape_json)
            for kind, shape_json, data in conn.execute(
                select(a.kind, a.shape_json, a.data).where(a.voice_id == voice_id)
            )
        }
        prompt_data = conn.execute(
            select(t.voice_prompts.c.data).where(t.voice_prompts.c.voice_id == voice_id)
        ).scalar()
        prompt = bytes(prompt_data) if prompt_data is not None else None
        if (
            consent_row is None
            or "embedding" not in arrays
            or (("style" in arrays) == (prompt is not None))
        ):
            # Cannot happen with atomic writes; if the database was edited by
            # hand, refuse to speak with a voice whose consent or data is missing.
            raise VoxcloneError("stored voice data is incomplete; delete and re-create the voice")
        audio: bytes | None = None
        if include_reference_audio:
            audio_data = conn.execute(
                select(t.voice_reference_audio.c.audio).where(
                    t.voice_reference_audio.c.voice_id == voice_id
                )
            ).scalar()
            audio = bytes(audio_data) if audio_data is not None else None
        return VoiceRecord(
            id=row[0],
            name=row[1],
            language=row[2],
            owner=row[3],
            created_at=row[4],
            updated_at=row[5],
            version=int(row[6]),
            consent=ConsentRecord(*consent_row),
            embedding=arrays["embedding"],
            style=arrays.get("style"),
            quality=json.loads(row[8]),
            source=row[7],
            reference_audio=audio,
            reference_spectrum=arrays.get("reference_spectrum"),
            tone_db=arrays.get("tone"),
            engine=row[9],
            model_id=row[10],
            model_version=row[11],
            prompt=prompt,
        )


# The embedded default is the same class on a SQLite file; the name stays for
# the callers and tests that construct it from a path.
SqliteVoiceStore = SqlVoiceStore
