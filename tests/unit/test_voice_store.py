"""The voice repository: tenancy, atomicity, complete deletion, round-trips.

Every test taking ``database_url`` (or ``store``) runs on SQLite and on
PostgreSQL (tests/conftest.py); the ones about files (secure deletion from the
SQLite file, SIGKILL mid-write) are SQLite's own.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import voice_record
from sqlalchemy import MetaData, func, select, text

from voxclone.errors import Conflict, InvalidInput, NotFound, VoiceChanged, VoxcloneError
from voxclone.runtime.db import Database
from voxclone.runtime.voice_store import (
    SqliteVoiceStore,
    SqlVoiceStore,
    VoiceRecord,
    VoiceStore,
    validate_voice_name,
)

# What the composition root passes: each engine's EngineCapabilities.style_shape.
SHAPES: dict[str, tuple[int, ...] | None] = {"kokoro": (510, 1, 256)}

SRC_DIR = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "voices.sqlite3"


@pytest.fixture
def store(database_url: str):
    with SqlVoiceStore(database_url, style_shapes=SHAPES) as s:
        yield s


def raw_rows_mentioning(db: Database, needle: str) -> list[tuple[str, tuple]]:
    """Every row of every table that contains ``needle`` in any column."""
    found = []
    tables = MetaData()
    tables.reflect(db.engine)
    assert "voices" in tables.tables and "voice_arrays" in tables.tables
    with db.read() as conn:
        for table in tables.sorted_tables:
            for row in conn.execute(select(table)):
                for value in row:
                    if isinstance(value, memoryview):
                        value = bytes(value)
                    shown = value.decode("latin-1") if isinstance(value, bytes) else str(value)
                    if needle in shown:
                        found.append((table.name, tuple(row[:3])))
                        break
    return found


def count_rows(db: Database, table: str) -> int:
    with db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(text(table))).scalar_one())


def chunk(array: np.ndarray | None, at: int) -> bytes:
    assert array is not None
    return array.tobytes()[at : at + 64]


def style_of(record: VoiceRecord) -> np.ndarray:
    """A stored clone's style (records of a style engine always have one)."""
    assert record.style is not None
    return record.style


def test_store_satisfies_protocol(store: SqliteVoiceStore) -> None:
    assert isinstance(store, VoiceStore)


def test_create_assigns_opaque_id_and_round_trips_arrays_bit_exactly(
    store: SqliteVoiceStore,
) -> None:
    record = voice_record(
        reference_audio=b"RIFF....fake wav",
        quality={"similarity": np.float32(0.5), "warnings": ["short"]},
        client_address="127.0.0.1",
    )
    created = store.create(record)
    assert created.id.startswith("v_") and len(created.id) == 18
    assert created.version == 1 and created.created_at.endswith("Z")

    loaded = store.get(created.id, "owner-a")
    assert loaded.embedding.dtype == np.float32 and loaded.embedding.shape == (256,)
    assert style_of(loaded).dtype == np.float32 and style_of(loaded).shape == (510, 1, 256)
    assert loaded.embedding.tobytes() == record.embedding.tobytes()
    assert style_of(loaded).tobytes() == style_of(record).tobytes()
    assert loaded.quality == {"similarity": pytest.approx(0.5), "warnings": ["short"]}
    assert loaded.consent.statement_sha256 == record.consent.statement_sha256
    assert loaded.consent.client_address == "127.0.0.1"
    assert loaded.reference_audio == b"RIFF....fake wav"
    assert store.get(created.id, "owner-a", include_reference_audio=False).reference_audio is None
    # The loaded arrays are ordinary writable arrays, not views of the DB buffer.
    style_of(loaded)[0, 0, 0] += 1.0


def test_ids_are_unique(store: SqliteVoiceStore) -> None:
    ids = {store.create(voice_record(name=f"v{i}")).id for i in range(20)}
    assert len(ids) == 20


def test_tenancy_other_owner_sees_nothing(store: SqliteVoiceStore) -> None:
    voice = store.create(voice_record(owner="owner-b"))
    for call in (
        lambda: store.get(voice.id, "owner-a"),
        lambda: store.rename(voice.id, "owner-a", "Stolen"),
        lambda: store.delete(voice.id, "owner-a"),
        lambda: store.update_style(
            voice.id, "owner-a", style=style_of(voice), quality={}, source="refined"
        ),
        lambda: store.drop_reference_audio(voice.id, "owner-a"),
    ):
        with pytest.raises(NotFound) as excinfo:
            call()
        # Identical to a voice that does not exist at all.
        with pytest.raises(NotFound) as missing:
            store.get("v_doesnotexist0000", "owner-a")
        assert type(excinfo.value) is type(missing.value)
        assert excinfo.value.to_body()["error"].keys() == missing.value.to_body()["error"].keys()
    assert store.list("owner-a") == []
    assert store.find_by_name("Alice", "owner-a") is None
    # Nothing changed for the real owner; the admin (owner=None) sees it too.
    assert store.get(voice.id, "owner-b").name == "Alice"
    assert store.get(voice.id, None).version == 1
    assert [s.id for s in store.list(None)] == [voice.id]


def test_names_unique_per_owner_case_insensitive(store: SqliteVoiceStore) -> None:
    store.create(voice_record(name="Alice", owner="owner-a"))
    store.create(voice_record(name="Alice", owner="owner-b"))  # other owner: fine
    with pytest.raises(Conflict) as excinfo:
        store.create(voice_record(name="  alice ", owner="owner-a"))
    assert excinfo.value.field == "name"
    assert store.count() == 2


def test_name_validation() -> None:
    assert validate_voice_name("  Bob  ") == "Bob"
    assert validate_voice_name("x" * 64) == "x" * 64
    for bad in ("", "   ", "x" * 65, "two\nlines", "tab\there", "bell\x07"):
        with pytest.raises(InvalidInput) as excinfo:
            validate_voice_name(bad)
        assert excinfo.value.field == "name" and excinfo.value.limit == 64


def test_create_rejects_bad_arrays_and_consent(store: SqliteVoiceStore) -> None:
    bad_shape = voice_record()
    bad_shape.style = np.zeros((510, 256), np.float32)
    with pytest.raises(InvalidInput) as excinfo:
        store.create(bad_shape)
    assert excinfo.value.field == "style"
    not_finite = voice_record()
    not_finite.embedding[3] = np.nan
    with pytest.raises(InvalidInput):
        store.create(not_finite)
    bad_consent = voice_record()
    bad_consent.consent.statement_sha256 = "abc"
    with pytest.raises(InvalidInput) as excinfo:
        store.create(bad_consent)
    assert excinfo.value.field == "consent"
    assert store.count() == 0


def test_find_by_name_and_list_paging(store: SqliteVoiceStore) -> None:
    created = [store.create(voice_record(name=f"Voice {i}", seed=i)) for i in range(5)]
    store.create(voice_record(name="Other", owner="owner-b"))
    found = store.find_by_name("voice 3", "owner-a")
    assert found is not None and found.id == created[3].id
    assert style_of(found).tobytes() == style_of(created[3]).tobytes()
    page1 = store.list("owner-a", limit=2, offset=0)
    page3 = store.list("owner-a", limit=2, offset=4)
    assert [s.id for s in page1] == [created[0].id, created[1].id]
    assert [s.id for s in page3] == [created[4].id]
    assert not any(isinstance(v, np.ndarray) for s in page1 for v in vars(s).values())
    assert store.count("owner-a") == 5 and store.count() == 6
    with pytest.raises(InvalidInput):
        store.list("owner-a", limit=0)


def test_update_style_bumps_version(store: SqliteVoiceStore) -> None:
    voice = store.create(voice_record())
    new_style = np.full((510, 1, 256), 0.25, np.float32)
    updated = store.update_style(
        voice.id, "owner-a", style=new_style, quality={"similarity": 0.7}, source="refined"
    )
    assert updated.version == 2 and updated.source == "refined"
    assert updated.updated_at >= voice.updated_at
    assert style_of(updated).tobytes() == new_style.tobytes()
    assert updated.embedding.tobytes() == voice.embedding.tobytes()  # untouched
    new_embedding = np.ones(256, np.float32)
    again = store.update_style(
        voice.id,
        "owner-a",
        style=new_style,
        embedding=new_embedding,
        quality={},
        source="refined",
    )
    assert again.version == 3
    assert store.get(voice.id, "owner-a").embedding.tobytes() == new_embedding.tobytes()


def test_update_style_over_a_stale_version_is_refused_and_changes_nothing(
    store: SqliteVoiceStore,
) -> None:
    # A background job (report, refinement) writes only over the version it
    # measured; a recording added meanwhile must survive it.
    voice = store.create(voice_record())

    def restyle(value: float, source: str, **kwargs: Any) -> Any:
        style = np.full((510, 1, 256), value, np.float32)
        return store.update_style(voice.id, "owner-a", style=style, source=source, **kwargs)

    newer = restyle(0.5, "instant", quality={})
    with pytest.raises(VoiceChanged) as refused:
        restyle(0.25, "refined", quality={"similarity": 0.1}, if_version=voice.version)
    assert refused.value.status == 409 and refused.value.value == newer.version
    kept = store.get(voice.id, "owner-a")
    assert kept.version == newer.version and kept.source == "instant"
    assert style_of(kept).tobytes() == style_of(newer).tobytes()
    landed = restyle(0.25, "refined", quality={}, if_version=newer.version)
    assert landed.version == newer.version + 1
    with pytest.raises(NotFound):
        store.update_style(
            "v_missing", "owner-a", style=newer.style, quality={}, source="refined", if_version=1
        )


def test_rename(store: SqliteVoiceStore) -> None:
    a = store.create(voice_record(name="A"))
    store.create(voice_record(name="B"))
    assert store.rename(a.id, "owner-a", "  Anna ").name == "Anna"
    assert store.rename(a.id, "owner-a", "anna").name == "anna"  # own name, new case
    with pytest.raises(Conflict):
        store.rename(a.id, "owner-a", "b")
    with pytest.raises(InvalidInput):
        store.rename(a.id, "owner-a", "")


def test_delete_leaves_no_derived_data(store: SqlVoiceStore) -> None:
    db = store.database
    keep = store.create(voice_record(name="Keep", seed=1))
    doomed = store.create(voice_record(name="Gone", seed=2, reference_audio=b"secret-audio-bytes"))
    assert raw_rows_mentioning(db, doomed.id)  # the scan does find live data

    deleted = store.delete(doomed.id, "owner-a")
    assert deleted.id == doomed.id and deleted.version == 1

    # Only the owed cache purge names it, until the purge is done.
    assert [row[0] for row in raw_rows_mentioning(db, doomed.id)] == ["purge_journal"]
    assert [p.voice_id for p in store.pending_purges()] == [doomed.id]
    store.purge_failed(doomed.id, "redis down")
    assert [(p.attempts, p.last_error) for p in store.pending_purges()] == [(1, "redis down")]
    store.record_purge(doomed.id)  # owed again: one row, attempts kept
    assert [p.attempts for p in store.pending_purges()] == [1]
    store.purge_done(doomed.id)
    assert raw_rows_mentioning(db, doomed.id) == []
    with pytest.raises(NotFound):
        store.get(doomed.id, "owner-a")
    with pytest.raises(NotFound):
        store.delete(doomed.id, "owner-a")
    assert store.get(keep.id, "owner-a").name == "Keep"
    if db.path is None:
        return  # PostgreSQL: dead tuples are reclaimed by VACUUM (docs/deploy.md)
    # secure_delete + WAL checkpoint: the biometric bytes are gone from the files too.
    blob = b"".join(p.read_bytes() for p in db.path.parent.iterdir() if p.is_file())
    # Short probes: a BLOB is split across overflow pages, so long runs would not match.
    probes = (0, 100_000, 400_000)
    assert not any(chunk(doomed.style, at) in blob for at in probes)
    assert chunk(doomed.embedding, 0) not in blob
    assert b"secret-audio-bytes" not in blob
    assert all(chunk(keep.style, at) in blob for at in probes)  # the probe can succeed


def test_drop_reference_audio(store: SqliteVoiceStore) -> None:
    voice = store.create(voice_record(reference_audio=b"pcm"))
    assert store.list("owner-a")[0].has_reference_audio
    assert store.drop_reference_audio(voice.id, "owner-a") is True
    assert store.drop_reference_audio(voice.id, "owner-a") is False
    assert store.get(voice.id, "owner-a").reference_audio is None


def test_concurrent_creates_from_eight_threads(store: SqliteVoiceStore) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        try:
            barrier.wait()
            for i in range(3):
                store.create(voice_record(name=f"t{n}-{i}", owner=f"owner-{n % 2}", seed=n))
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert store.count() == 24
    assert len(store.list("owner-0")) == 12


def test_concurrent_creates_of_one_name_leave_exactly_one(store: SqlVoiceStore) -> None:
    """Eight threads enroll "Same" at once: one voice, seven Conflicts, no half rows."""
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        barrier.wait()
        try:
            store.create(voice_record(name="Same" if n % 2 else "same", seed=n))
            outcomes.append("created")
        except Conflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == ["conflict"] * 7 + ["created"]
    assert store.count() == 1
    assert count_rows(store.database, "voice_consents") == 1
    assert count_rows(store.database, "voice_arrays") == 2  # embedding + style


def test_concurrent_deletes_of_one_voice_journal_once(store: SqlVoiceStore) -> None:
    voice = store.create(voice_record())
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        barrier.wait()
        try:
            store.delete(voice.id, "owner-a")
            outcomes.append("deleted")
        except NotFound:
            outcomes.append("not found")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == ["deleted"] + ["not found"] * 3
    assert [p.voice_id for p in store.pending_purges()] == [voice.id]


def test_concurrent_renames_to_one_name(store: SqlVoiceStore) -> None:
    ids = [store.create(voice_record(name=f"n{i}", seed=i)).id for i in range(6)]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(ids))

    def worker(voice_id: str) -> None:
        barrier.wait()
        try:
            store.rename(voice_id, "owner-a", "Winner")
            outcomes.append("renamed")
        except Conflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=worker, args=(v,)) for v in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == ["conflict"] * 5 + ["renamed"]
    assert [s.name for s in store.list("owner-a")].count("Winner") == 1


PROMPT_SHAPES: dict[str, tuple[int, ...] | None] = {**SHAPES, "fakeprompt": None, "tiny": (4, 8)}


def prompt_record(name: str = "Pat", prompt: bytes = b"\x00opaque conditioning\xff") -> VoiceRecord:
    record = voice_record(name=name)
    record.style = None
    record.prompt = prompt
    record.engine, record.model_id, record.model_version = "fakeprompt", "fake-1", "abc"
    return record


def test_prompt_voice_round_trip_and_delete_purges_the_prompt(database_url: str) -> None:
    with SqlVoiceStore(database_url, style_shapes=PROMPT_SHAPES) as s:
        created = s.create(prompt_record())
        loaded = s.get(created.id, "owner-a")
        assert loaded.prompt == b"\x00opaque conditioning\xff" and loaded.style is None
        assert (loaded.engine, loaded.model_id, loaded.model_version) == (
            "fakeprompt",
            "fake-1",
            "abc",
        )
        summary = s.list("owner-a")[0]
        assert (summary.engine, summary.model_id) == ("fakeprompt", "fake-1")
        s.delete(created.id, "owner-a")
        assert count_rows(s.database, "voice_prompts") == 0
        if s.database.path is not None:
            assert b"opaque conditioning" not in s.database.path.read_bytes()


def test_store_validates_against_each_engines_style_shape(database_url: str) -> None:
    with SqlVoiceStore(database_url, style_shapes=PROMPT_SHAPES) as s:
        # Another engine's shape is fine for that engine, wrong for Kokoro.
        tiny = voice_record(name="Tiny")
        tiny.engine, tiny.style = "tiny", np.ones((4, 8), np.float32)
        assert s.create(tiny).style is not None
        kokoro_sized = voice_record(name="Big")
        kokoro_sized.engine = "tiny"
        with pytest.raises(InvalidInput) as excinfo:
            s.create(kokoro_sized)
        assert excinfo.value.field == "style" and excinfo.value.limit == [4, 8]
        # A prompt engine's voice carries a prompt, never a style array, and back.
        with_style = prompt_record(name="Both")
        with_style.style = np.ones((4, 8), np.float32)
        with pytest.raises(InvalidInput, match="prompt, not a style"):
            s.create(with_style)
        with pytest.raises(InvalidInput) as excinfo:
            s.create(prompt_record(name="Empty", prompt=b""))
        assert excinfo.value.field == "prompt"
        style_with_prompt = voice_record(name="Odd")
        style_with_prompt.prompt = b"x"
        with pytest.raises(InvalidInput, match="style array, not a reference prompt"):
            s.create(style_with_prompt)
        unknown = voice_record(name="Who")
        unknown.engine = "nope"
        with pytest.raises(InvalidInput) as excinfo:
            s.create(unknown)
        assert excinfo.value.field == "engine"


def test_refuses_schema_from_the_future(database_url: str) -> None:
    with SqlVoiceStore(database_url, style_shapes=SHAPES) as s:
        s.create(voice_record())
        with s.database.write() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    with pytest.raises(VoxcloneError, match="newer"):
        SqlVoiceStore(database_url, style_shapes=SHAPES)


def test_failed_statement_rolls_back_whole_voice(database_url: str) -> None:
    def fail_after_style(step: str) -> None:
        if step == "style":
            raise RuntimeError("disk full")

    with SqlVoiceStore(database_url, style_shapes=SHAPES, statement_hook=fail_after_style) as s:
        with pytest.raises(RuntimeError):
            s.create(voice_record())
        assert s.count() == 0
        assert count_rows(s.database, "voice_consents") == 0
    with SqlVoiceStore(database_url, style_shapes=SHAPES) as s:
        assert s.create(voice_record()).version == 1  # name is free again
