"""The current schema, as SQLAlchemy Core tables the repositories query.

This module describes the *newest* revision; the Alembic revisions in
``migrations/versions`` are what create and change real databases, and they
never import it (a revision must keep meaning what it meant when written).
``tests/unit/test_db_migrations.py`` checks that both agree.

Portable types only: TEXT, INTEGER, FLOAT (double precision on PostgreSQL),
and LargeBinary (BLOB / BYTEA). Times of voices and jobs are ISO-8601 UTC text,
which sorts correctly in both dialects; key and inline-log times are Unix
seconds as they have always been.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)

# Voices stored before engines were recorded were all made for Kokoro.
LEGACY_ENGINE = "kokoro"
LEGACY_MODEL_ID = "kokoro-82m-v1.0-int8"

metadata = MetaData()


def _voice_fk() -> ForeignKey:
    return ForeignKey("voices.id", ondelete="CASCADE")


# -- voices aggregate --------------------------------------------------------

voices = Table(
    "voices",
    metadata,
    Column("id", Text, primary_key=True),
    Column("owner", Text, nullable=False),
    Column("name", Text, nullable=False),
    # casefold()ed name: names are unique per owner regardless of case.
    Column("name_key", Text, nullable=False),
    Column("language", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("source", Text, nullable=False),
    Column("quality_json", Text, nullable=False),
    Column("engine", Text, nullable=False, server_default=LEGACY_ENGINE),
    Column("model_id", Text, nullable=False, server_default=LEGACY_MODEL_ID),
    Column("model_version", Text, nullable=False, server_default=""),
    Index("voices_owner_name", "owner", "name_key", unique=True),
    Index("voices_owner_created", "owner", "created_at", "id"),
)

voice_consents = Table(
    "voice_consents",
    metadata,
    Column("voice_id", Text, _voice_fk(), primary_key=True),
    Column("statement_sha256", Text, nullable=False),
    Column("given_by", Text, nullable=False),
    Column("given_at", Text, nullable=False),
    Column("client_address", Text),
)

# Arrays are raw little-endian float32 bytes plus their shape as JSON.
voice_arrays = Table(
    "voice_arrays",
    metadata,
    Column("voice_id", Text, _voice_fk(), nullable=False),
    Column("kind", Text, nullable=False),
    Column("shape_json", Text, nullable=False),
    Column("data", LargeBinary, nullable=False),
    PrimaryKeyConstraint("voice_id", "kind"),
)

voice_reference_audio = Table(
    "voice_reference_audio",
    metadata,
    Column("voice_id", Text, _voice_fk(), primary_key=True),
    Column("audio", LargeBinary, nullable=False),
)

voice_prompts = Table(
    "voice_prompts",
    metadata,
    Column("voice_id", Text, _voice_fk(), primary_key=True),
    Column("data", LargeBinary, nullable=False),
)

# A row says: audio derived from this voice may still sit in a cache tier that
# could not be reached when the voice was deleted. Written in the deletion's
# own transaction, so a purge can be delayed but never lost.
purge_journal = Table(
    "purge_journal",
    metadata,
    Column("voice_id", Text, primary_key=True),
    Column("requested_at", Text, nullable=False),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("last_error", Text),
)

# -- jobs aggregate ----------------------------------------------------------

jobs = Table(
    "jobs",
    metadata,
    Column("id", Text, primary_key=True),
    Column("kind", Text, nullable=False),
    Column("voice_id", Text),
    Column("owner", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("progress", Float, nullable=False),
    Column("message", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("result_json", Text),
    Column("error_json", Text),
    Column("cancel_requested", Integer, nullable=False, server_default=text("0")),
    # The durable queue (revision 0002_job_queue): what to do, tries, lease,
    # backoff (Unix seconds) and the client's idempotency key.
    Column("payload_json", Text),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("max_attempts", Integer, nullable=False, server_default=text("1")),
    Column("claimed_by", Text),
    Column("lease_expires_at", Float),
    Column("run_after", Float),
    Column("idempotency_key", Text),
    # Unix seconds of the latest claim (revision 0004_job_voices): the fair
    # claim serves the owner served longest ago first (runtime/job_store/fairness.py).
    Column("started_at", Float),
    Index("jobs_owner_created", "owner", "created_at"),
    Index("jobs_state", "state"),
    Index("jobs_voice", "voice_id"),
    Index("jobs_owner_idempotency", "owner", "idempotency_key", unique=True),
    Index("jobs_queue", "state", "run_after"),
    Index("jobs_owner_started", "owner", "started_at"),
)

# Every stored voice a job speaks with (main voice, blend parts, SSML <voice>
# switches; revision 0004_job_voices). No foreign key to voices: a link to a
# deleted voice is what the revocation sweep looks for (runtime/job_store/voice_links.py).
job_voices = Table(
    "job_voices",
    metadata,
    Column("job_id", Text, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("voice_id", Text, nullable=False),
    PrimaryKeyConstraint("job_id", "voice_id"),
    Index("job_voices_voice", "voice_id"),
)

# -- inline voices (consent audit of one-request clones) ---------------------

inline_voice_uses = Table(
    "inline_voice_uses",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("voice_id", Text, nullable=False),
    Column("owner", Text, nullable=False),
    Column("statement_sha256", Text, nullable=False),
    Column("given_by", Text, nullable=False),
    Column("given_at", Text, nullable=False),
    Column("client_address", Text),
    Column("expires_at", Float, nullable=False),  # Unix seconds
    Column("purged_at", Float),
    Index(
        "inline_voice_uses_pending",
        "voice_id",
        sqlite_where=text("purged_at IS NULL"),
        postgresql_where=text("purged_at IS NULL"),
    ),
)

# -- API keys aggregate ------------------------------------------------------

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("owner", Text, nullable=False),
    Column("scopes", Text, nullable=False),
    Column("key_hash", LargeBinary, nullable=False),
    Column("prefix", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float),
    UniqueConstraint("key_hash", name="api_keys_key_hash"),
    Index("api_keys_prefix", "prefix"),
)

# -- pronunciation lexicon (per owner) ----------------------------------------

lexicon_entries = Table(
    "lexicon_entries",
    metadata,
    Column("owner", Text, nullable=False),
    Column("language", Text, nullable=False),
    Column("word_key", Text, nullable=False),  # case-folded: what text matches on
    Column("word", Text, nullable=False),
    Column("ipa", Text),
    Column("respelling", Text),
    Column("updated_at", Text, nullable=False),  # ISO-8601 UTC
    PrimaryKeyConstraint("owner", "language", "word_key"),
)
