"""Voice library store: who owns which cloned voice, with its consent record.

A voice is biometric data (docs/design.md §1.5), so this package is strict about
three things:

* **Tenancy.** Every read and write takes an ``owner``. A voice of another
  owner behaves exactly like a missing one (``NotFound``), so ids cannot be
  probed. ``owner=None`` means an administrator acting on any voice.
* **Atomicity.** A voice and all of its rows (consent, arrays, optional
  reference audio) are written in one transaction.
* **Complete deletion.** Deleting a voice removes every row that mentions it,
  and SQLite is run with ``secure_delete`` plus a WAL checkpoint so the bytes
  do not linger in free pages or in the write-ahead log. Its blobs (everything
  under ``voices/<id>/`` in the blob store) are deleted right after, and again
  by the journaled purge if the blob store could not be reached then.

One module per job: ``records`` (the records, limits and the
:class:`VoiceStore` protocol, which includes :class:`PurgeJournal`),
``validation`` (checks of caller input), ``arrays`` (array shapes per engine
and their stored bytes), ``queries`` (the SQL shared by reads and writes),
``purge_journal`` (purges owed), ``reference_blobs`` (a voice's blobs) and
``sql_store`` (:class:`SqlVoiceStore`, the repository on SQLite or
PostgreSQL). This package exports what the layers above use.
"""

from voxclone.runtime.voice_store.records import (
    BLEND_SOURCE,
    DEFAULT_EMBEDDING_SHAPE,
    DEFAULT_TONE_SHAPE,
    ENGINE_MAX_CHARS,
    IN_BLOB_STORE,
    LANGUAGE_MAX_CHARS,
    LEGACY_ENGINE,
    LEGACY_MODEL_ID,
    LIST_MAX_LIMIT,
    NAME_MAX_CHARS,
    OWNER_MAX_CHARS,
    PROMPT_MAX_BYTES,
    VOICE_SOURCES,
    ConsentRecord,
    PendingPurge,
    PurgeJournal,
    StatementHook,
    VoiceRecord,
    VoiceSource,
    VoiceStore,
    VoiceSummary,
    new_voice_id,
    utc_now_iso,
)
from voxclone.runtime.voice_store.sql_store import SqliteVoiceStore, SqlVoiceStore
from voxclone.runtime.voice_store.validation import validate_voice_name

__all__ = [
    "BLEND_SOURCE",
    "DEFAULT_EMBEDDING_SHAPE",
    "DEFAULT_TONE_SHAPE",
    "ENGINE_MAX_CHARS",
    "IN_BLOB_STORE",
    "LANGUAGE_MAX_CHARS",
    "LEGACY_ENGINE",
    "LEGACY_MODEL_ID",
    "LIST_MAX_LIMIT",
    "NAME_MAX_CHARS",
    "OWNER_MAX_CHARS",
    "PROMPT_MAX_BYTES",
    "VOICE_SOURCES",
    "ConsentRecord",
    "PendingPurge",
    "PurgeJournal",
    "SqlVoiceStore",
    "SqliteVoiceStore",
    "StatementHook",
    "VoiceRecord",
    "VoiceSource",
    "VoiceStore",
    "VoiceSummary",
    "new_voice_id",
    "utc_now_iso",
    "validate_voice_name",
]
