"""Baseline: voices, purge journal, jobs, inline voice log, API keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

On an empty database this creates the whole schema. On a database written by
voxclone before Alembic (tables made by hand-kept SQL, versions in a
``schema_version`` table, API keys and the inline log with ``CREATE TABLE IF
NOT EXISTS``) it adds only what is missing, so every voice, job and key stays:

* voices schema 1 → 2: the ``voices_owner_created`` index;
* voices schema 2 → 3: the ``engine``, ``model_id``, ``model_version`` columns
  (existing voices are Kokoro's) and the ``voice_prompts`` table;

then drops ``schema_version``, whose role Alembic's version table takes over.
A ``schema_version`` newer than those versions means a newer voxclone wrote
the file: refused, nothing changed.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from voxclone.errors import VoxcloneError

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# The last versions the hand-kept migrations reached, per component.
_LEGACY_VERSIONS = {"voices": 3, "purge_journal": 1, "jobs": 1}


def _fk() -> sa.ForeignKey:
    return sa.ForeignKey("voices.id", ondelete="CASCADE")


def _tables() -> dict[str, tuple[Any, ...]]:
    """Each table of this revision: its columns and constraints."""
    return {
        "voices": (
            sa.Column("id", sa.Text, primary_key=True),
            sa.Column("owner", sa.Text, nullable=False),
            sa.Column("name", sa.Text, nullable=False),
            sa.Column("name_key", sa.Text, nullable=False),
            sa.Column("language", sa.Text, nullable=False),
            sa.Column("created_at", sa.Text, nullable=False),
            sa.Column("updated_at", sa.Text, nullable=False),
            sa.Column("version", sa.Integer, nullable=False),
            sa.Column("source", sa.Text, nullable=False),
            sa.Column("quality_json", sa.Text, nullable=False),
            *_engine_columns(),
        ),
        "voice_consents": (
            sa.Column("voice_id", sa.Text, _fk(), primary_key=True),
            sa.Column("statement_sha256", sa.Text, nullable=False),
            sa.Column("given_by", sa.Text, nullable=False),
            sa.Column("given_at", sa.Text, nullable=False),
            sa.Column("client_address", sa.Text),
        ),
        "voice_arrays": (
            sa.Column("voice_id", sa.Text, _fk(), nullable=False),
            sa.Column("kind", sa.Text, nullable=False),
            sa.Column("shape_json", sa.Text, nullable=False),
            sa.Column("data", sa.LargeBinary, nullable=False),
            sa.PrimaryKeyConstraint("voice_id", "kind"),
        ),
        "voice_reference_audio": (
            sa.Column("voice_id", sa.Text, _fk(), primary_key=True),
            sa.Column("audio", sa.LargeBinary, nullable=False),
        ),
        "voice_prompts": (
            sa.Column("voice_id", sa.Text, _fk(), primary_key=True),
            sa.Column("data", sa.LargeBinary, nullable=False),
        ),
        "purge_journal": (
            sa.Column("voice_id", sa.Text, primary_key=True),
            sa.Column("requested_at", sa.Text, nullable=False),
            sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
            sa.Column("last_error", sa.Text),
        ),
        "jobs": (
            sa.Column("id", sa.Text, primary_key=True),
            sa.Column("kind", sa.Text, nullable=False),
            sa.Column("voice_id", sa.Text),
            sa.Column("owner", sa.Text, nullable=False),
            sa.Column("state", sa.Text, nullable=False),
            sa.Column("progress", sa.Float, nullable=False),
            sa.Column("message", sa.Text, nullable=False),
            sa.Column("created_at", sa.Text, nullable=False),
            sa.Column("updated_at", sa.Text, nullable=False),
            sa.Column("result_json", sa.Text),
            sa.Column("error_json", sa.Text),
            sa.Column("cancel_requested", sa.Integer, nullable=False, server_default=sa.text("0")),
        ),
        "inline_voice_uses": (
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("voice_id", sa.Text, nullable=False),
            sa.Column("owner", sa.Text, nullable=False),
            sa.Column("statement_sha256", sa.Text, nullable=False),
            sa.Column("given_by", sa.Text, nullable=False),
            sa.Column("given_at", sa.Text, nullable=False),
            sa.Column("client_address", sa.Text),
            sa.Column("expires_at", sa.Float, nullable=False),
            sa.Column("purged_at", sa.Float),
        ),
        "api_keys": (
            sa.Column("id", sa.Text, primary_key=True),
            sa.Column("name", sa.Text, nullable=False),
            sa.Column("owner", sa.Text, nullable=False),
            sa.Column("scopes", sa.Text, nullable=False),
            sa.Column("key_hash", sa.LargeBinary, nullable=False),
            sa.Column("prefix", sa.Text, nullable=False),
            sa.Column("created_at", sa.Float, nullable=False),
            sa.Column("revoked_at", sa.Float),
            sa.UniqueConstraint("key_hash", name="api_keys_key_hash"),
        ),
    }


def _engine_columns() -> tuple[sa.Column[str], ...]:
    # Defaults: voices made before engines were recorded are Kokoro voices.
    return (
        sa.Column("engine", sa.Text, nullable=False, server_default="kokoro"),
        sa.Column("model_id", sa.Text, nullable=False, server_default="kokoro-82m-v1.0-int8"),
        sa.Column("model_version", sa.Text, nullable=False, server_default=""),
    )


# name -> (table, columns, unique, partial-index condition)
_INDEXES: dict[str, tuple[str, list[str], bool, str | None]] = {
    "voices_owner_name": ("voices", ["owner", "name_key"], True, None),
    "voices_owner_created": ("voices", ["owner", "created_at", "id"], False, None),
    "jobs_owner_created": ("jobs", ["owner", "created_at"], False, None),
    "jobs_state": ("jobs", ["state"], False, None),
    "jobs_voice": ("jobs", ["voice_id"], False, None),
    "inline_voice_uses_pending": ("inline_voice_uses", ["voice_id"], False, "purged_at IS NULL"),
    "api_keys_prefix": ("api_keys", ["prefix"], False, None),
}


def _refuse_newer_legacy_schema(inspector: sa.Inspector) -> None:
    if not inspector.has_table("schema_version"):
        return
    rows = op.get_bind().execute(sa.text("SELECT component, version FROM schema_version"))
    for component, version in rows:
        known = _LEGACY_VERSIONS.get(str(component))
        if known is not None and int(version) > known:
            raise VoxcloneError(
                f"the {component} tables were written by a newer "
                f"voxclone (schema {version}, this version knows up to {known})"
            )


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    _refuse_newer_legacy_schema(inspector)
    for name, items in _tables().items():
        if not inspector.has_table(name):
            op.create_table(name, *items)
        elif name == "voices":
            present = {c["name"] for c in inspector.get_columns("voices")}
            for column in _engine_columns():
                if column.name not in present:
                    op.add_column("voices", column)
    inspector = sa.inspect(bind)  # fresh: it caches what it has seen
    for index_name, (table, columns, unique, where) in _INDEXES.items():
        existing = {ix["name"] for ix in inspector.get_indexes(table)}
        if index_name in existing:
            continue
        extra: dict[str, Any] = {}
        if where is not None:
            extra = {"sqlite_where": sa.text(where), "postgresql_where": sa.text(where)}
        op.create_index(index_name, table, columns, unique=unique, **extra)
    if inspector.has_table("schema_version"):
        op.drop_table("schema_version")
