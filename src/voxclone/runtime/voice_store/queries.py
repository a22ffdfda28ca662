"""The SQL every read and write of a voice shares: its row and its child
tables, the owner filter, loading a whole record, locking a row, the name
check and the saved blends derived from a voice.

The owner filter is a plain ``WHERE``: a voice of another owner behaves
exactly like a missing one (``NotFound``), so ids cannot be probed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, and_, exists, select

from voxclone.errors import Conflict, NotFound, VoxcloneError
from voxclone.runtime.db import tables as t
from voxclone.runtime.voice_store.arrays import decode_array
from voxclone.runtime.voice_store.records import (
    BLEND_SOURCE,
    ConsentRecord,
    VoiceRecord,
    VoiceSummary,
)
from voxclone.runtime.voice_store.validation import name_key

# Every table holding a voice's data, child tables first. Deletion walks this
# list explicitly rather than trusting ON DELETE CASCADE alone.
VOICE_CHILD_TABLES: tuple[Table, ...] = (
    t.voice_reference_audio,
    t.voice_prompts,
    t.voice_arrays,
    t.voice_consents,
)

_V = t.voices.c

# A voice's own columns, read by position (load_voice, summary_from_row).
RECORD_COLUMNS = (
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
)
SUMMARY_COLUMNS = (
    *RECORD_COLUMNS,
    exists().where(t.voice_reference_audio.c.voice_id == _V.id).label("has_reference_audio"),
)


def voice_where(voice_id: str, owner: str | None) -> ColumnElement[bool]:
    # The owner filter is added in Python rather than "(:owner IS NULL OR owner
    # = :owner)", which PostgreSQL cannot type and which defeats the index.
    clause = _V.id == voice_id
    return clause if owner is None else and_(clause, _V.owner == owner)


def _voice_fields(row: Sequence[Any]) -> dict[str, Any]:
    """The fields a summary and a whole record share, from RECORD_COLUMNS."""
    return {
        "id": row[0],
        "name": row[1],
        "language": row[2],
        "owner": row[3],
        "created_at": row[4],
        "updated_at": row[5],
        "version": int(row[6]),
        "source": row[7],
        "quality": json.loads(row[8]),
        "engine": row[9],
        "model_id": row[10],
        "model_version": row[11],
    }


def summary_from_row(row: Sequence[Any]) -> VoiceSummary:
    return VoiceSummary(**_voice_fields(row), has_reference_audio=bool(row[12]))


def not_found(voice_id: str) -> NotFound:
    # Same message whether the voice is missing or belongs to someone else.
    return NotFound(f"voice {voice_id[:40]!r} not found", field="voice_id")


def name_taken(name: str) -> Conflict:
    return Conflict(f"you already have a voice named {name!r}", field="name")


def blend_part_ids(quality_json: str | None) -> set[str]:
    """The voice ids a saved blend's quality report names as its parts."""
    try:
        blend = json.loads(quality_json or "{}").get("blend") or {}
        return {str(p["voice"]) for p in blend.get("parts", []) if isinstance(p, dict)}
    except (ValueError, AttributeError, KeyError, TypeError):
        return set()


def lock_voice(conn: Connection, voice_id: str, owner: str | None) -> str:
    """Lock the voice row for this transaction (PostgreSQL); return its owner.

    SQLite already holds the database write lock (BEGIN IMMEDIATE), and
    SQLAlchemy renders no FOR UPDATE there.
    """
    row_owner = conn.execute(
        select(_V.owner).where(voice_where(voice_id, owner)).with_for_update()
    ).scalar()
    if row_owner is None:
        raise not_found(voice_id)
    return str(row_owner)


def ensure_name_free(conn: Connection, owner: str, name: str, except_id: str | None) -> None:
    found = conn.execute(
        select(_V.id).where(_V.owner == owner, _V.name_key == name_key(name))
    ).scalar()
    if found is not None and found != except_id:
        raise name_taken(name)


def derived_blend_ids(conn: Connection, voice_id: str, owner: str) -> list[str]:
    # Parts are always the owner's own voices (or built-ins), so only the
    # owner's blends can be derived from ``voice_id``; few rows per owner.
    rows = conn.execute(
        select(_V.id, _V.quality_json).where(_V.owner == owner, _V.source == BLEND_SOURCE)
    ).all()
    parts_of = {str(row[0]): blend_part_ids(row[1]) for row in rows}
    found: list[str] = []
    frontier = [voice_id]
    while frontier:
        part = frontier.pop()
        for blend_id, parts in parts_of.items():
            if part in parts and blend_id not in found and blend_id != voice_id:
                found.append(blend_id)
                frontier.append(blend_id)
    return found


def load_voice(
    conn: Connection,
    voice_id: str,
    owner: str | None,
    include_reference_audio: bool,
) -> VoiceRecord:
    row = conn.execute(select(*RECORD_COLUMNS).where(voice_where(voice_id, owner))).first()
    if row is None:
        raise not_found(voice_id)
    c = t.voice_consents.c
    consent_row = conn.execute(
        select(c.statement_sha256, c.given_by, c.given_at, c.client_address).where(
            c.voice_id == voice_id
        )
    ).first()
    a = t.voice_arrays.c
    arrays = {
        kind: decode_array(bytes(data), shape_json)
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
        **_voice_fields(row),
        consent=ConsentRecord(*consent_row),
        embedding=arrays["embedding"],
        style=arrays.get("style"),
        reference_audio=audio,
        reference_spectrum=arrays.get("reference_spectrum"),
        tone_db=arrays.get("tone"),
        prompt=prompt,
    )
