"""The voice repository: the voice library in the voxclone database (SQLite
file or PostgreSQL), written with SQLAlchemy Core so one code path serves both.

* **Atomicity.** A voice and all of its rows (consent, arrays, optional
  reference audio) are written in one transaction: a crash in the middle of an
  enrollment leaves either the whole voice or nothing.
* **Complete deletion.** Deleting a voice removes every row that mentions it
  (and the saved blends made from it), owes its purge in the same transaction,
  checkpoints the WAL, then deletes its blobs.
* SQLite takes the write lock up front (``BEGIN IMMEDIATE``); PostgreSQL locks
  the voice row (``SELECT ... FOR UPDATE``) where a read precedes a write; in
  both, the unique index on ``(owner, name_key)`` settles two creates of the
  same name racing (the loser gets ``Conflict``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection, and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from voxclone.errors import Conflict, InvalidInput, VoiceChanged
from voxclone.runtime.blobs import BlobStore
from voxclone.runtime.db import Database, upsert
from voxclone.runtime.db import tables as t
from voxclone.runtime.voice_store.arrays import VoiceShapes, copy_or_none, encode_array
from voxclone.runtime.voice_store.purge_journal import VoicePurgeJournal
from voxclone.runtime.voice_store.queries import (
    SUMMARY_COLUMNS,
    VOICE_CHILD_TABLES,
    derived_blend_ids,
    ensure_name_free,
    load_voice,
    lock_voice,
    name_taken,
    not_found,
    summary_from_row,
    voice_where,
)
from voxclone.runtime.voice_store.records import (
    DEFAULT_EMBEDDING_SHAPE,
    DEFAULT_TONE_SHAPE,
    IN_BLOB_STORE,
    LANGUAGE_MAX_CHARS,
    OWNER_MAX_CHARS,
    StatementHook,
    VoiceRecord,
    VoiceSummary,
    new_voice_id,
    utc_now_iso,
)
from voxclone.runtime.voice_store.reference_blobs import ReferenceBlobs
from voxclone.runtime.voice_store.validation import (
    check_page,
    name_key,
    quality_to_json,
    validate_consent,
    validate_short_text,
    validate_source,
    validate_voice_name,
)

_V = t.voices.c


class SqlVoiceStore(VoicePurgeJournal):
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
        self._blobs = ReferenceBlobs(blobs)
        self._shapes = VoiceShapes(style_shapes, embedding_shape, tone_shape)
        self._hook = statement_hook

    @property
    def blobs(self) -> BlobStore | None:
        return self._blobs.store

    # -- writes -------------------------------------------------------------

    def create(self, record: VoiceRecord) -> VoiceRecord:
        name = validate_voice_name(record.name)
        owner = validate_short_text(record.owner, "owner", OWNER_MAX_CHARS)
        language = validate_short_text(record.language, "language", LANGUAGE_MAX_CHARS)
        source = validate_source(record.source)
        consent = validate_consent(record.consent)
        embedding = self._shapes.checked_embedding(record.embedding)
        engine, model_id, model_version = self._shapes.checked_model(record)
        style, prompt = self._shapes.checked_conditioning(engine, record.style, record.prompt)
        tone_arrays = self._shapes.checked_tone(record.reference_spectrum, record.tone_db)
        quality_json = quality_to_json(record.quality)
        if record.reference_audio is not None and not isinstance(record.reference_audio, bytes):
            raise InvalidInput("reference audio must be bytes", field="reference_audio")

        voice_id = record.id or new_voice_id()
        now = utc_now_iso()
        created_at = record.created_at or now
        updated_at = record.updated_at or created_at

        stored_audio = record.reference_audio
        in_blobs = stored_audio is not None and self._blobs.store is not None
        if in_blobs:
            assert stored_audio is not None
            # The blob first: a failing blob store fails the enrollment before any
            # row exists. An explicit id that is taken must not overwrite the blob
            # of the voice that has it.
            if record.id:
                with self._db.read() as conn:
                    if conn.execute(select(_V.id).where(_V.id == voice_id)).first():
                        raise Conflict("a voice with this id already exists", field="id")
            self._blobs.put_reference(voice_id, stored_audio)
            stored_audio = IN_BLOB_STORE
        try:
            with self._db.write() as conn:
                if conn.execute(select(_V.id).where(_V.id == voice_id)).first():
                    raise Conflict("a voice with this id already exists", field="id")
                ensure_name_free(conn, owner, name, except_id=None)
                # Two creates of one name racing past the check above: the
                # unique index on (owner, name_key) stops the second one here.
                conn.execute(
                    insert(t.voices).values(
                        id=voice_id,
                        owner=owner,
                        name=name,
                        name_key=name_key(name),
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
                self._blobs.forget(voice_id)  # the voice was never stored
            if isinstance(exc, IntegrityError):
                raise name_taken(name) from None
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
            style=copy_or_none(style),
            quality=json.loads(quality_json),
            source=source,
            reference_audio=record.reference_audio,
            reference_spectrum=copy_or_none(tone_arrays.get("reference_spectrum")),
            tone_db=copy_or_none(tone_arrays.get("tone")),
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
            engine = conn.execute(select(_V.engine).where(voice_where(voice_id, owner))).scalar()
        if engine is None:
            raise not_found(voice_id)
        checked_style, _ = self._shapes.checked_conditioning(engine, style, None)
        assert checked_style is not None
        checked_embedding = None if embedding is None else self._shapes.checked_embedding(embedding)
        tone_arrays = self._shapes.checked_tone(reference_spectrum, tone_db)
        quality_json = quality_to_json(quality)
        validate_source(source)
        where = voice_where(voice_id, owner)
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
                now = conn.execute(select(_V.version).where(voice_where(voice_id, owner))).scalar()
                if now is None:
                    raise not_found(voice_id)
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
                row_owner = lock_voice(conn, voice_id, owner)
                ensure_name_free(conn, row_owner, cleaned, except_id=voice_id)
                conn.execute(
                    update(t.voices)
                    .where(_V.id == voice_id)
                    .values(name=cleaned, name_key=name_key(cleaned), updated_at=utc_now_iso())
                )
        except IntegrityError:
            raise name_taken(cleaned) from None
        return self.get(voice_id, owner)

    def drop_reference_audio(self, voice_id: str, owner: str | None) -> bool:
        """Forget the kept reference recording; True if there was one."""
        with self._db.write() as conn:
            lock_voice(conn, voice_id, owner)
            result = conn.execute(
                delete(t.voice_reference_audio).where(
                    t.voice_reference_audio.c.voice_id == voice_id
                )
            )
            dropped = result.rowcount > 0
        if dropped:
            self._db.checkpoint()
            # Not owed to the purge journal: a failure here is reported (503)
            # and the user can drop it again; the row is already gone, though,
            # so the blob is deleted again with the voice in any case.
            self._blobs.drop_reference(voice_id)
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
        i.e. data derived from their recordings (docs/design.md §1.5): it must not
        outlive a part. Every deleted voice owes its own journaled purge.
        """
        with self._db.write() as conn:
            # Lock first: of two concurrent deletes one wins, the other gets NotFound.
            lock_voice(conn, voice_id, owner)
            record = load_voice(conn, voice_id, owner, include_reference_audio=False)
            doomed = [record]
            doomed += [
                load_voice(conn, blend_id, record.owner, include_reference_audio=False)
                for blend_id in derived_blend_ids(conn, voice_id, record.owner)
            ]
            for victim in doomed:
                for table in VOICE_CHILD_TABLES:
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
            self._blobs.forget(victim.id)
        return doomed

    def derived_blends(self, voice_id: str, owner: str) -> list[str]:
        """Ids of the owner's saved blends made (transitively) from ``voice_id``."""
        with self._db.read() as conn:
            return derived_blend_ids(conn, voice_id, owner)

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
        render asks before keeping audio made with it (service/speech/service.py)."""
        with self._db.read() as conn:
            found = conn.execute(select(_V.version).where(_V.id == voice_id)).scalar()
        return None if found is None else int(found)

    def kept_recordings(self, voice_ids: Collection[str]) -> int:
        """How many of ``voice_ids`` keep a reference recording (a deletion
        receipt's count, read just before the deletion)."""
        r = t.voice_reference_audio.c
        with self._db.read() as conn:
            found = conn.execute(
                select(func.count())
                .select_from(t.voice_reference_audio)
                .where(r.voice_id.in_(list(voice_ids)))
            ).scalar()
        return int(found or 0)

    def purge_blobs(self, voice_id: str) -> int:
        """Delete every blob of ``voice_id`` (``voices/<id>/``); how many were there.

        Raises when the blob store cannot be reached: the journaled purge calls
        this and keeps the debt for a retry.
        """
        return self._blobs.purge(voice_id)

    # -- reads --------------------------------------------------------------

    def get(
        self, voice_id: str, owner: str | None, *, include_reference_audio: bool = True
    ) -> VoiceRecord:
        with self._db.read() as conn:
            record = load_voice(conn, voice_id, owner, include_reference_audio)
        return self._blobs.with_audio(record)

    def find_by_name(
        self, name: str, owner: str, *, include_reference_audio: bool = True
    ) -> VoiceRecord | None:
        """The owner's voice with this name (case-insensitive), or None."""
        key = name_key(name.strip()) if isinstance(name, str) else ""
        if not key:
            return None
        with self._db.read() as conn:
            voice_id = conn.execute(
                select(_V.id).where(_V.owner == owner, _V.name_key == key)
            ).scalar()
            if voice_id is None:
                return None
            record = load_voice(conn, voice_id, owner, include_reference_audio)
        return self._blobs.with_audio(record)

    def list(self, owner: str | None, limit: int = 100, offset: int = 0) -> list[VoiceSummary]:
        """Voices oldest first, metadata only."""
        check_page(limit, offset)
        query = select(*SUMMARY_COLUMNS)
        if owner is not None:
            query = query.where(_V.owner == owner)
        query = query.order_by(_V.created_at, _V.id).limit(limit).offset(offset)
        with self._db.read() as conn:
            rows = conn.execute(query).all()
        return [summary_from_row(row) for row in rows]

    def count(self, owner: str | None = None) -> int:
        query = select(func.count()).select_from(t.voices)
        if owner is not None:
            query = query.where(_V.owner == owner)
        with self._db.read() as conn:
            return int(conn.execute(query).scalar_one())

    # -- internals ----------------------------------------------------------

    def _step(self, name: str) -> None:
        if self._hook is not None:
            self._hook(name)

    def _write_array(
        self,
        conn: Connection,
        voice_id: str,
        kind: str,
        array: np.ndarray,
        *,
        replace: bool = False,
    ) -> None:
        data, shape_json = encode_array(array)
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


# The embedded default is the same class on a SQLite file; the name stays for
# the callers and tests that construct it from a path.
SqliteVoiceStore = SqlVoiceStore
