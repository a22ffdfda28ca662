"""Alembic migrations: the upgrade from the hand-kept SQLite schema keeps every row.

The old databases here were written by the old stores themselves (the files in
tests/data/pre_alembic, tests/unit/pre_alembic.py), not by SQL re-typed for the
test.
"""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from fakes import voice_record
from pre_alembic import EXPECTED, sha256, thaw

from voxclone.errors import VoxcloneError
from voxclone.runtime.db import Database, head_revision, sqlite_url, upgrade
from voxclone.runtime.db import tables as current_schema
from voxclone.runtime.inline_log import InlineVoiceLog
from voxclone.runtime.job_store import INTERRUPTED_MESSAGE, SqlJobStore
from voxclone.runtime.keys import KeyStore
from voxclone.runtime.voice_store import LEGACY_ENGINE, LEGACY_MODEL_ID, SqlVoiceStore, VoiceRecord

SHAPES: dict[str, tuple[int, ...] | None] = {"kokoro": (510, 1, 256)}
PROMPT_SHAPES: dict[str, tuple[int, ...] | None] = {**SHAPES, "fakeprompt": None}


def _same_voice(new: VoiceRecord, old: dict[str, Any]) -> None:
    """``new`` (today's store) holds every field the old store returned."""
    for attr, value in old.items():
        got = getattr(new, attr)
        if attr == "consent":
            assert vars(got) == value
        elif isinstance(value, dict) and "sha256" in value:
            assert sha256(got) == value["sha256"], attr
        elif isinstance(value, dict) and "base64" in value:
            assert got == base64.b64decode(value["base64"]), attr
        else:
            assert got == value, attr


def test_upgrade_from_the_pre_alembic_files_keeps_every_voice_job_and_key(tmp_path: Path) -> None:
    expected = EXPECTED["library"]
    written = expected["voices"]
    db_file = thaw("library.sqlite3", tmp_path / "voxclone.sqlite3")
    key_file = thaw("keys.sqlite3", tmp_path / "keys.sqlite3")
    conn = sqlite3.connect(db_file)
    assert dict(conn.execute("SELECT component, version FROM schema_version")) == {
        "voices": 3,
        "purge_journal": 1,
        "jobs": 1,
    }
    conn.close()

    # --- the new code opens the old files ----------------------------------
    with SqlVoiceStore(db_file, style_shapes=PROMPT_SHAPES) as voices:
        assert voices.count() == len(written)
        for old in written:
            _same_voice(voices.get(old["id"], old["owner"]), old)
        assert [p.voice_id for p in voices.pending_purges()] == [expected["deleted_voice"]]
        assert [s.name for s in voices.list("owner-a")] == ["Plain", "With audio", "Prompted"]
        # The upgraded library takes new voices and edits of old ones.
        assert voices.create(voice_record("New", seed=6)).version == 1
        assert voices.rename(written[2]["id"], "owner-b", "Renamed").name == "Renamed"
        voices.delete(written[1]["id"], "owner-a")
        assert voices.count() == len(written)

    done = expected["succeeded_job"]
    with SqlJobStore(db_file) as jobs:
        # The old process is gone: its running job is failed, as before.
        assert jobs.get(expected["running_job"], None).message == INTERRUPTED_MESSAGE
        upgraded = vars(jobs.get(done["id"], "owner-b"))
        # Every field the old code wrote is kept; the queue's columns are new.
        assert {k: upgraded[k] for k in done} == done
        assert (upgraded["payload"], upgraded["attempts"], upgraded["max_attempts"]) == (None, 0, 1)
        assert [j.id for j in jobs.list(None)] == [done["id"], expected["running_job"]]

    inline = InlineVoiceLog(db_file)
    assert inline.pending() == ["iv_1"]
    assert [(u.voice_id, u.consent.given_by) for u in inline.uses()] == [
        ("iv_1", "owner-a"),
        ("iv_2", "owner-a"),
    ]
    inline.close()

    active, revoked = expected["keys"]["active"], expected["keys"]["revoked"]
    keys = KeyStore(key_file)
    found = keys.authenticate(active["plaintext"])
    assert found is not None and (found.id, found.owner) == (active["id"], "team-a")
    assert found.scopes == frozenset({"tts", "voices:read"})
    assert keys.authenticate(revoked["plaintext"]) is None
    assert [k.id for k in keys.list()] == [active["id"], revoked["id"]]
    assert keys.get(revoked["id"]).revoked_at == pytest.approx(revoked_at(key_file, revoked["id"]))
    keys.close()

    for path in (db_file, key_file):
        conn = sqlite3.connect(path)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        conn.close()
        assert "schema_version" not in tables and version == [(head_revision(),)]


def revoked_at(path: Path, key_id: str) -> float:
    conn = sqlite3.connect(path)
    (value,) = conn.execute("SELECT revoked_at FROM api_keys WHERE id = ?", (key_id,)).fetchone()
    conn.close()
    return float(value)


@pytest.mark.parametrize("schema", [1, 2])
def test_older_voice_schemas_become_kokoro_voices(tmp_path: Path, schema: int) -> None:
    name = f"voices_schema{schema}"
    db_path = thaw(f"{name}.sqlite3", tmp_path / "voxclone.sqlite3")
    with SqlVoiceStore(db_path, style_shapes=SHAPES) as s:
        voice = s.get("v_old", "owner-a")
        assert (voice.engine, voice.model_id, voice.model_version) == (
            LEGACY_ENGINE,
            LEGACY_MODEL_ID,
            "",
        )
        assert voice.prompt is None and voice.style is not None
        assert sha256(voice.style) == EXPECTED[name]["style"]["sha256"]
        # The migrated library takes new voices, and refinements of the old one.
        s.update_style("v_old", "owner-a", style=voice.style, quality={}, source="refined")
    conn = sqlite3.connect(db_path)
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    conn.close()
    assert {"voices_owner_created", "voices_owner_name"} <= indexes


def test_a_legacy_schema_from_a_newer_voxclone_is_refused_untouched(tmp_path: Path) -> None:
    db_path = thaw("voices_schema2.sqlite3", tmp_path / "voxclone.sqlite3")
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE schema_version SET version = 99 WHERE component = 'voices'")
    conn.commit()
    conn.close()
    with pytest.raises(VoxcloneError, match="newer"):
        SqlVoiceStore(db_path, style_shapes=SHAPES)
    conn = sqlite3.connect(db_path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert "schema_version" in tables and "alembic_version" not in tables and "jobs" not in tables


def test_migrations_build_exactly_the_schema_the_repositories_query(database_url: str) -> None:
    """The revisions and runtime/db/tables.py describe the same tables, per dialect."""
    db = Database(database_url)
    upgrade(db)
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), current_schema.metadata)
    db.close()
    assert diff == []


def test_db_cli_migrates_the_configured_databases(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from voxclone.api.cli import main

    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "home"))
    shared = not database_url.startswith("sqlite")
    if shared:
        monkeypatch.setenv("VOXCLONE_DATABASE_URL", database_url)
    else:
        monkeypatch.delenv("VOXCLONE_DATABASE_URL", raising=False)
    assert main(["db", "upgrade"]) == 0
    assert main(["db", "current"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # Embedded: the library file and the key file; shared: one database for both.
    assert len(lines) == (2 if not shared else 1) * 2
    assert all(f": {head_revision()} (this version: {head_revision()})" in line for line in lines)
    assert all("SECRET" not in line for line in lines)


def test_the_head_known_without_alembic_is_alembics_head() -> None:
    # db/revision.py lets a current database open without importing Alembic;
    # a new migration must move HEAD_REVISION too, or this fails.
    from voxclone.runtime.db.revision import HEAD_REVISION

    assert head_revision() == HEAD_REVISION


def test_a_database_at_an_older_revision_is_migrated_when_a_store_opens_it(
    tmp_path: Path,
) -> None:
    from voxclone.runtime.db.revision import stored_revision

    path = tmp_path / "old.sqlite3"
    db = Database(sqlite_url(path))
    upgrade(db, "0002_job_queue")
    assert stored_revision(db) == "0002_job_queue"
    db.close()
    store = SqlVoiceStore(path, style_shapes=SHAPES)
    try:
        assert stored_revision(store.database) == head_revision()
    finally:
        store.close()
