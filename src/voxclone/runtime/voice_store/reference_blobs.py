"""A voice's blobs: its kept reference recording and everything else under
``voices/<id>/`` in the blob store.

Kept reference audio lives in the blob store when the store is given one: the
``voice_reference_audio`` row of such a voice holds no bytes
(:data:`~voxclone.runtime.voice_store.records.IN_BLOB_STORE`) and only says
"the recording is at ``voices/<id>/reference``". Voices written before (or by a
store without blobs) keep their bytes in the row and are read from it as
always; nothing is moved behind the operator's back.
"""

from __future__ import annotations

import logging

from voxclone.errors import InvalidInput, VoxcloneError
from voxclone.runtime.blobs import BlobNotFound, BlobStore, voice_prefix, voice_reference_key
from voxclone.runtime.voice_store.records import IN_BLOB_STORE, VoiceRecord

log = logging.getLogger(__name__)


class ReferenceBlobs:
    """The voice store's side of the blob store (None: recordings stay in rows)."""

    def __init__(self, blobs: BlobStore | None) -> None:
        self.store = blobs

    def put_reference(self, voice_id: str, audio: bytes) -> None:
        """Keep ``audio`` as the voice's reference recording (before its rows exist)."""
        assert self.store is not None
        try:
            reference_key = voice_reference_key(voice_id)
        except ValueError:
            raise InvalidInput("this voice id cannot name a blob", field="id") from None
        self.store.put(reference_key, audio, content_type="application/octet-stream")

    def drop_reference(self, voice_id: str) -> None:
        if self.store is not None:
            self.store.delete_prefix(voice_reference_key(voice_id))

    def purge(self, voice_id: str) -> int:
        """Delete every blob of ``voice_id`` (``voices/<id>/``); how many were there.

        Raises when the blob store cannot be reached: the journaled purge calls
        this and keeps the debt for a retry.
        """
        if self.store is None:
            return 0
        try:
            prefix = voice_prefix(voice_id)
        except ValueError:  # an id no blob key can hold: nothing was ever stored
            return 0
        return self.store.delete_prefix(prefix)

    def forget(self, voice_id: str) -> None:
        """:meth:`purge`, postponed to the journaled purge when it fails."""
        try:
            self.purge(voice_id)
        except Exception as exc:  # the journaled purge retries it
            log.warning("blob purge of a deleted voice postponed: %s", type(exc).__name__)

    def with_audio(self, record: VoiceRecord) -> VoiceRecord:
        """Fetch a reference kept in the blob store, outside any database transaction."""
        if record.reference_audio is None or record.reference_audio != IN_BLOB_STORE:
            return record
        if self.store is None:
            raise VoxcloneError(
                "this voice's reference audio is in the blob store, which this process "
                "was not given (configure the same VOXCLONE_S3_* settings as the server)"
            )
        try:
            record.reference_audio = self.store.get(voice_reference_key(record.id))
        except BlobNotFound:
            # Lost with a bucket or purged by hand: the voice still speaks.
            log.warning("kept reference audio of a voice is missing from the blob store")
            record.reference_audio = None
        return record
