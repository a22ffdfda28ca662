"""Alembic migrations: the upgrade from the hand-kept SQLite schema keeps every row.

The old databases here are written by the old stores themselves
(tests/data/legacy_v0, copied unchanged from the last version before Alembic),
not by SQL re-typed for the test.
"""

from __future__ import annotations

import importlib
import json
import sqlite3
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from voxclone.errors import VoxcloneError
from voxclone.runtime.db import Database, current_revision, head_revision, sqlite_url, upgrade
from voxclone.runtime.db import tables as current_schema
from voxclone.runtime.inline_log import InlineVoiceLog
from voxclone.runtime.job_store import INTERRUPTED_MESSAGE, SqlJobStore
from voxclone.runtime.keys import KeyStore
from voxclone.runtime.voice_store import LEGACY_ENGINE, LEGACY_MODEL_ID, SqlVoiceStore

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
SHAPES: dict[str, tuple[int, ...] | None] = {"kokoro": (510, 1, 256)}
PROMPT_SHAPES: dict[str, tuple[int, ...] | None] = {**SHAPES, "fakeprompt": None}


class Legacy:
    def __init__(self) -> None:
        sys.path.insert(0, str(DATA_DIR))
        try:
            self.voice_store: ModuleType = importlib.import_module("legacy_v0.voice_store")
            self.job_store: ModuleType = importlib.import_module("legacy_v0.job_store")
            self.keys: ModuleType = importlib.import_module("legacy_v0.keys")
            self.inline_log: ModuleType = importlib.import_module("legacy_v0.inline_log")
        finally:
            sys.path.remove(str(DATA_DIR))


@pytest.fixture(scope="module")
def legacy() -> Legacy:
    return Legacy()


def legacy_record(legacy: Legacy, name: str, seed: int, **extra: object) -> object:
    rng = np.random.default_rng(seed)
    vs = legacy.voice_store
    record = vs.VoiceRecord(
        id="",
        name=name,
        language="en-us",
        owner=str(extra.pop("owner", "owner-a")),
        created_at="",
        updated_at="",
        version=0,
        consent=vs.ConsentRecord("ab" * 32, "owner-a", "2025-01-02T03:04:05Z", "10.0.0.1"),
        embedding=rng.standard_normal(256).astype(np.float32),
        style=rng.standard_normal((510, 1, 256)).astype(np.float32),
        quality={"similarity": 0.5 + seed / 100},
        source="instant",
    )
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def _same_voice(new: object, old: object) -> None:
    for attr in ("id", "name", "owner", "language", "created_at", "updated_at", "version"):
        assert getattr(new, attr) == getattr(old, attr), attr
    for attr in ("source", "quality", "engine", "model_id", "model_version", "prompt"):
        assert getattr(new, attr) == getattr(old, attr), attr
    assert vars(new.consent) == vars(old.consent)  # type: ignore[attr-defined]
    assert new.reference_audio == old.reference_audio  # type: ignore[attr-defined]
    for attr in ("embedding", "style", "tone_db", "reference_spectrum"):
        a, b = getattr(new, attr), getattr(old, attr)
        assert (a is None) == (b is None), attr
        if a is not None:
            assert a.tobytes() == b.tobytes(), attr


def test_upgrade_from_the_pre_alembic_files_keeps_every_voice_job_and_key(
    legacy: Legacy, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db_file, key_file = home / "voxclone.sqlite3", home / "keys.sqlite3"

    # --- what the old voxclone wrote -------------------------------------
    old_voices = legacy.voice_store.SqliteVoiceStore(db_file, style_shapes=PROMPT_SHAPES)
    tone = np.linspace(-3, 3, legacy.voice_store.DEFAULT_TONE_SHAPE[0]).astype(np.float32)
    written = [
        old_voices.create(legacy_record(legacy, "Plain", 1)),
        old_voices.create(
            legacy_record(
                legacy,
                "With audio",
                2,
                reference_audio=b"RIFF-old-wav",
                tone_db=tone,
                reference_spectrum=tone * 2,
            )
        ),  # fmt: skip
        old_voices.create(legacy_record(legacy, "Other owner", 3, owner="owner-b")),
        old_voices.create(
            legacy_record(
                legacy,
                "Prompted",
                4,
                style=None,
                prompt=b"\x00opaque\xff",
                engine="fakeprompt",
                model_id="fake-1",
                model_version="abc",
            )
        ),  # fmt: skip
    ]
    refined = old_voices.update_style(
        written[0].id, "owner-a", style=written[1].style, quality={"s": 1}, source="refined"
    )
    written[0] = refined
    gone = old_voices.create(legacy_record(legacy, "Deleted", 5))
    old_voices.delete(gone.id, "owner-a")  # leaves a purge owed
    old_voices.close()

    old_jobs = legacy.job_store.SqliteJobStore(db_file)
    running = old_jobs.create(kind="refine", owner="owner-a", voice_id=written[0].id)
    old_jobs.update(running.id, state="running", progress=40.0)
    done = old_jobs.create(kind="refine", owner="owner-b", voice_id=written[2].id)
    old_jobs.update(done.id, state="running")
    done = old_jobs.update(done.id, state="succeeded", result={"similarity": 0.8})
    old_jobs.close()

    old_inline = legacy.inline_log.InlineVoiceLog(db_file)
    consent = legacy.voice_store.ConsentRecord("cd" * 32, "owner-a", "2025-02-03T04:05:06Z")
    old_inline.record("iv_1", "owner-a", consent, expires_at=time.time() + 60)
    old_inline.record("iv_2", "owner-a", consent, expires_at=time.time() - 60)
    old_inline.mark_purged("iv_2")
    old_inline.close()

    old_keys = legacy.keys.KeyStore(key_file)
    plain_active, active = old_keys.create("ci", {"tts", "voices:read"}, owner="team-a")
    plain_revoked, revoked = old_keys.create("old", {"admin"})
    old_keys.revoke(revoked.id)
    old_keys.close()

    conn = sqlite3.connect(db_file)
    assert dict(conn.execute("SELECT component, version FROM schema_version")) == {
        "voices": 3,
        "purge_journal": 1,
        "jobs": 1,
    }
    conn.close()

    # --- the new code opens the same files ---------------------------------
    with SqlVoiceStore(db_file, style_shapes=PROMPT_SHAPES) as voices:
        assert voices.count() == len(written)
        for old in written:
            owner = old.owner  # type: ignore[attr-defined]
            _same_voice(voices.get(old.id, owner), old)  # type: ignore[attr-defined]
        assert [p.voice_id for p in voices.pending_purges()] == [gone.id]
        assert [s.name for s in voices.list("owner-a")] == ["Plain", "With audio", "Prompted"]
        # The upgraded library takes new voices and edits of old ones.
        assert voices.create(legacy_record(legacy, "New", 6)).version == 1  # type: ignore[arg-type]
        assert voices.rename(written[2].id, "owner-b", "Renamed").name == "Renamed"
        voices.delete(written[1].id, "owner-a")
        assert voices.count() == len(written)

    with SqlJobStore(db_file) as jobs:
        # The old process is gone: its running job is failed, as before.
        assert jobs.get(running.id, None).message == INTERRUPTED_MESSAGE
        upgraded = vars(jobs.get(done.id, "owner-b"))
        # Every field the old code wrote is kept; the queue's columns are new.
        assert {k: upgraded[k] for k in vars(done)} == vars(done)
        assert (upgraded["payload"], upgraded["attempts"], upgraded["max_attempts"]) == (None, 0, 1)
        assert [j.id for j in jobs.list(None)] == [done.id, running.id]

    inline = InlineVoiceLog(db_file)
    assert inline.pending() == ["iv_1"]
    assert [(u.voice_id, u.consent.given_by) for u in inline.uses()] == [
        ("iv_1", "owner-a"),
        ("iv_2", "owner-a"),
    ]
    inline.close()

    keys = KeyStore(key_file)
    found = keys.authenticate(plain_active)
    assert found is not None and (found.id, found.owner) == (active.id, "team-a")
    assert found.scopes == frozenset({"tts", "voices:read"})
    assert keys.authenticate(plain_revoked) is None
    assert [k.id for k in keys.list()] == [active.id, revoked.id]
    assert keys.get(revoked.id).revoked_at == pytest.approx(revoked_at(key_file, revoked.id))
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


def _legacy_voices_at_schema(legacy: Legacy, db_path: Path, schema: int) -> object:
    """A library as voxclone wrote it at voice schema ``schema`` (1 or 2), with one voice."""
    vs = legacy.voice_store
    db = vs.SqliteDatabase(db_path)
    vs.apply_migrations(db, "voices", vs._VOICE_MIGRATIONS[:schema])
    db.close()
    record = legacy_record(legacy, "Old", 0)
    conn = sqlite3.connect(db_path)
    conn.execute(
        "INSERT INTO voices (id, owner, name, name_key, language, created_at, updated_at,"
        " version, source, quality_json) VALUES ('v_old', 'owner-a', 'Old', 'old', 'en-us',"
        " '2025-01-01T00:00:00.000000Z', '2025-01-01T00:00:00.000000Z', 1, 'instant', '{}')"
    )
    c = record.consent  # type: ignore[attr-defined]
    conn.execute(
        "INSERT INTO voice_consents VALUES ('v_old', ?, ?, ?, ?)",
        (c.statement_sha256, c.given_by, c.given_at, c.client_address),
    )
    for kind in ("embedding", "style"):
        array = getattr(record, kind)
        conn.execute(
            "INSERT INTO voice_arrays VALUES ('v_old', ?, ?, ?)",
            (kind, json.dumps(list(array.shape)), array.astype("<f4").tobytes()),
        )
    conn.commit()
    conn.close()
    return record


@pytest.mark.parametrize("schema", [1, 2])
def test_older_voice_schemas_become_kokoro_voices(
    legacy: Legacy, tmp_path: Path, schema: int
) -> None:
    db_path = tmp_path / "voxclone.sqlite3"
    old = _legacy_voices_at_schema(legacy, db_path, schema)
    with SqlVoiceStore(db_path, style_shapes=SHAPES) as s:
        voice = s.get("v_old", "owner-a")
        assert (voice.engine, voice.model_id, voice.model_version) == (
            LEGACY_ENGINE,
            LEGACY_MODEL_ID,
            "",
        )
        assert voice.prompt is None and voice.style is not None
        assert voice.style.tobytes() == old.style.tobytes()  # type: ignore[attr-defined]
        # The migrated library takes new voices, and refinements of the old one.
        s.update_style("v_old", "owner-a", style=voice.style, quality={}, source="refined")
    conn = sqlite3.connect(db_path)
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    conn.close()
    assert {"voices_owner_created", "voices_owner_name"} <= indexes


def test_a_legacy_schema_from_a_newer_voxclone_is_refused_untouched(
    legacy: Legacy, tmp_path: Path
) -> None:
    db_path = tmp_path / "voxclone.sqlite3"
    legacy.voice_store.SqliteVoiceStore(db_path, style_shapes=SHAPES).close()
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


def test_two_processes_opening_a_fresh_file_migrate_it_once(tmp_path: Path) -> None:
    # Thirty fresh files, four openers each: switching a new file to WAL raced
    # ("database is locked" at once, no busy wait) in about 1 of 10 rounds.
    for round_ in range(30):
        url = sqlite_url(tmp_path / f"fresh-{round_}.sqlite3")
        errors: list[BaseException] = []
        barrier = threading.Barrier(4)

        def opener(url: str = url, errors: list[BaseException] = errors, barrier=barrier) -> None:
            db = Database(url)
            try:
                barrier.wait()
                upgrade(db)
            except BaseException as exc:
                errors.append(exc)
            finally:
                db.close()

        threads = [threading.Thread(target=opener) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == [], round_
    db = Database(url)
    assert current_revision(db) == head_revision()
    db.close()


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
