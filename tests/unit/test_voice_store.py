"""SqliteVoiceStore: tenancy, atomicity, complete deletion, round-trips."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from voxclone.errors import Conflict, InvalidInput, NotFound, VoxcloneError
from voxclone.runtime.voice_store import (
    _VOICE_MIGRATIONS,
    LEGACY_ENGINE,
    LEGACY_MODEL_ID,
    ConsentRecord,
    SqliteDatabase,
    SqliteVoiceStore,
    VoiceRecord,
    VoiceStore,
    apply_migrations,
    validate_voice_name,
)

# What the composition root passes: each engine's EngineCapabilities.style_shape.
SHAPES: dict[str, tuple[int, ...] | None] = {"kokoro": (510, 1, 256)}

SRC_DIR = Path(__file__).resolve().parents[2] / "src"


def make_record(
    name: str = "Alice",
    owner: str = "owner-a",
    *,
    seed: int = 0,
    reference_audio: bytes | None = None,
) -> VoiceRecord:
    rng = np.random.default_rng(seed)
    return VoiceRecord(
        id="",
        name=name,
        language="en-us",
        owner=owner,
        created_at="",
        updated_at="",
        version=0,
        consent=ConsentRecord(
            statement_sha256=hashlib.sha256(b"I agree to be cloned").hexdigest(),
            given_by=owner,
            given_at="2025-01-02T03:04:05Z",
            client_address="127.0.0.1",
        ),
        embedding=rng.standard_normal(256).astype(np.float32),
        style=rng.standard_normal((510, 1, 256)).astype(np.float32),
        quality={"similarity": np.float32(0.5), "warnings": ["short"]},
        source="instant",
        reference_audio=reference_audio,
    )


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "voices.sqlite3"


@pytest.fixture
def store(db_path: Path):
    with SqliteVoiceStore(db_path, style_shapes=SHAPES) as s:
        yield s


def raw_rows_mentioning(db_path: Path, needle: str) -> list[tuple[str, tuple]]:
    """Every row of every table that contains ``needle`` in any column."""
    found = []
    conn = sqlite3.connect(db_path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        assert "voices" in tables and "voice_arrays" in tables
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
                    if needle in text:
                        found.append((table, row[:3]))
                        break
    finally:
        conn.close()
    return found


def chunk(array: np.ndarray, at: int) -> bytes:
    return array.tobytes()[at : at + 64]


def test_store_satisfies_protocol(store: SqliteVoiceStore) -> None:
    assert isinstance(store, VoiceStore)


def test_create_assigns_opaque_id_and_round_trips_arrays_bit_exactly(
    store: SqliteVoiceStore,
) -> None:
    record = make_record(reference_audio=b"RIFF....fake wav")
    created = store.create(record)
    assert created.id.startswith("v_") and len(created.id) == 18
    assert created.version == 1 and created.created_at.endswith("Z")

    loaded = store.get(created.id, "owner-a")
    assert loaded.embedding.dtype == np.float32 and loaded.embedding.shape == (256,)
    assert loaded.style.dtype == np.float32 and loaded.style.shape == (510, 1, 256)
    assert loaded.embedding.tobytes() == record.embedding.tobytes()
    assert loaded.style.tobytes() == record.style.tobytes()
    assert loaded.quality == {"similarity": pytest.approx(0.5), "warnings": ["short"]}
    assert loaded.consent.statement_sha256 == record.consent.statement_sha256
    assert loaded.consent.client_address == "127.0.0.1"
    assert loaded.reference_audio == b"RIFF....fake wav"
    assert store.get(created.id, "owner-a", include_reference_audio=False).reference_audio is None
    # The loaded arrays are ordinary writable arrays, not views of the DB buffer.
    loaded.style[0, 0, 0] += 1.0


def test_ids_are_unique(store: SqliteVoiceStore) -> None:
    ids = {store.create(make_record(name=f"v{i}")).id for i in range(20)}
    assert len(ids) == 20


def test_tenancy_other_owner_sees_nothing(store: SqliteVoiceStore) -> None:
    voice = store.create(make_record(owner="owner-b"))
    for call in (
        lambda: store.get(voice.id, "owner-a"),
        lambda: store.rename(voice.id, "owner-a", "Stolen"),
        lambda: store.delete(voice.id, "owner-a"),
        lambda: store.update_style(
            voice.id, "owner-a", style=voice.style, quality={}, source="refined"
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
    store.create(make_record(name="Alice", owner="owner-a"))
    store.create(make_record(name="Alice", owner="owner-b"))  # other owner: fine
    with pytest.raises(Conflict) as excinfo:
        store.create(make_record(name="  alice ", owner="owner-a"))
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
    bad_shape = make_record()
    bad_shape.style = np.zeros((510, 256), np.float32)
    with pytest.raises(InvalidInput) as excinfo:
        store.create(bad_shape)
    assert excinfo.value.field == "style"
    not_finite = make_record()
    not_finite.embedding[3] = np.nan
    with pytest.raises(InvalidInput):
        store.create(not_finite)
    bad_consent = make_record()
    bad_consent.consent.statement_sha256 = "abc"
    with pytest.raises(InvalidInput) as excinfo:
        store.create(bad_consent)
    assert excinfo.value.field == "consent"
    assert store.count() == 0


def test_find_by_name_and_list_paging(store: SqliteVoiceStore) -> None:
    created = [store.create(make_record(name=f"Voice {i}", seed=i)) for i in range(5)]
    store.create(make_record(name="Other", owner="owner-b"))
    found = store.find_by_name("voice 3", "owner-a")
    assert found is not None and found.id == created[3].id
    assert found.style.tobytes() == created[3].style.tobytes()
    page1 = store.list("owner-a", limit=2, offset=0)
    page3 = store.list("owner-a", limit=2, offset=4)
    assert [s.id for s in page1] == [created[0].id, created[1].id]
    assert [s.id for s in page3] == [created[4].id]
    assert not any(isinstance(v, np.ndarray) for s in page1 for v in vars(s).values())
    assert store.count("owner-a") == 5 and store.count() == 6
    with pytest.raises(InvalidInput):
        store.list("owner-a", limit=0)


def test_update_style_bumps_version(store: SqliteVoiceStore) -> None:
    voice = store.create(make_record())
    new_style = np.full((510, 1, 256), 0.25, np.float32)
    updated = store.update_style(
        voice.id, "owner-a", style=new_style, quality={"similarity": 0.7}, source="refined"
    )
    assert updated.version == 2 and updated.source == "refined"
    assert updated.updated_at >= voice.updated_at
    assert updated.style.tobytes() == new_style.tobytes()
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


def test_rename(store: SqliteVoiceStore) -> None:
    a = store.create(make_record(name="A"))
    store.create(make_record(name="B"))
    assert store.rename(a.id, "owner-a", "  Anna ").name == "Anna"
    assert store.rename(a.id, "owner-a", "anna").name == "anna"  # own name, new case
    with pytest.raises(Conflict):
        store.rename(a.id, "owner-a", "b")
    with pytest.raises(InvalidInput):
        store.rename(a.id, "owner-a", "")


def test_delete_leaves_no_derived_data(store: SqliteVoiceStore, db_path: Path) -> None:
    keep = store.create(make_record(name="Keep", seed=1))
    doomed = store.create(make_record(name="Gone", seed=2, reference_audio=b"secret-audio-bytes"))
    assert raw_rows_mentioning(db_path, doomed.id)  # the scan does find live data

    deleted = store.delete(doomed.id, "owner-a")
    assert deleted.id == doomed.id and deleted.version == 1

    # Only the owed cache purge names it, until the purge is done.
    assert [row[0] for row in raw_rows_mentioning(db_path, doomed.id)] == ["purge_journal"]
    assert [p.voice_id for p in store.pending_purges()] == [doomed.id]
    store.purge_done(doomed.id)
    assert raw_rows_mentioning(db_path, doomed.id) == []
    with pytest.raises(NotFound):
        store.get(doomed.id, "owner-a")
    with pytest.raises(NotFound):
        store.delete(doomed.id, "owner-a")
    assert store.get(keep.id, "owner-a").name == "Keep"
    # secure_delete + WAL checkpoint: the biometric bytes are gone from the files too.
    blob = b"".join(p.read_bytes() for p in db_path.parent.iterdir() if p.is_file())
    # Short probes: a BLOB is split across overflow pages, so long runs would not match.
    probes = (0, 100_000, 400_000)
    assert not any(chunk(doomed.style, at) in blob for at in probes)
    assert chunk(doomed.embedding, 0) not in blob
    assert b"secret-audio-bytes" not in blob
    assert all(chunk(keep.style, at) in blob for at in probes)  # the probe can succeed


def test_drop_reference_audio(store: SqliteVoiceStore) -> None:
    voice = store.create(make_record(reference_audio=b"pcm"))
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
                store.create(make_record(name=f"t{n}-{i}", owner=f"owner-{n % 2}", seed=n))
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


def _legacy_file(db_path: Path, schema: int) -> VoiceRecord:
    """A library as an older voxclone wrote it (schema ``schema``), with one voice."""
    db = SqliteDatabase(db_path)
    apply_migrations(db, SqliteVoiceStore.COMPONENT, _VOICE_MIGRATIONS[:schema])
    db.close()
    record = make_record(name="Old")
    assert record.style is not None
    conn = sqlite3.connect(db_path)
    conn.execute(
        "INSERT INTO voices (id, owner, name, name_key, language, created_at, updated_at,"
        " version, source, quality_json) VALUES ('v_old', 'owner-a', 'Old', 'old', 'en-us',"
        " '2025-01-01T00:00:00.000000Z', '2025-01-01T00:00:00.000000Z', 1, 'instant', '{}')"
    )
    consent = record.consent
    conn.execute(
        "INSERT INTO voice_consents VALUES ('v_old', ?, ?, ?, ?)",
        (consent.statement_sha256, consent.given_by, consent.given_at, consent.client_address),
    )
    for kind, array in (("embedding", record.embedding), ("style", record.style)):
        conn.execute(
            "INSERT INTO voice_arrays VALUES ('v_old', ?, ?, ?)",
            (kind, json.dumps(list(array.shape)), array.astype("<f4").tobytes()),
        )
    conn.commit()
    conn.close()
    return record


@pytest.mark.parametrize("schema", [1, 2])
def test_migration_keeps_older_voices_as_kokoro_voices(db_path: Path, schema: int) -> None:
    old = _legacy_file(db_path, schema)
    with SqliteVoiceStore(db_path, style_shapes=SHAPES) as s:
        assert s.schema_version == len(_VOICE_MIGRATIONS) == 3
        voice = s.get("v_old", "owner-a")
        assert (voice.engine, voice.model_id, voice.model_version) == (
            LEGACY_ENGINE,
            LEGACY_MODEL_ID,
            "",
        )
        assert voice.prompt is None and voice.style is not None and old.style is not None
        assert voice.style.tobytes() == old.style.tobytes()
        assert [v.engine for v in s.list("owner-a")] == [LEGACY_ENGINE]
        # The migrated library takes new voices, and refinements of the old one.
        s.create(make_record(name="New"))
        s.update_style("v_old", "owner-a", style=old.style, quality={}, source="refined")
    conn = sqlite3.connect(db_path)
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    version = conn.execute("SELECT version FROM schema_version WHERE component='voices'").fetchone()
    conn.close()
    assert "voices_owner_created" in indexes and version == (3,)


PROMPT_SHAPES: dict[str, tuple[int, ...] | None] = {**SHAPES, "fakeprompt": None, "tiny": (4, 8)}


def prompt_record(name: str = "Pat", prompt: bytes = b"\x00opaque conditioning\xff") -> VoiceRecord:
    record = make_record(name=name)
    record.style = None
    record.prompt = prompt
    record.engine, record.model_id, record.model_version = "fakeprompt", "fake-1", "abc"
    return record


def test_prompt_voice_round_trip_and_delete_purges_the_prompt(db_path: Path) -> None:
    with SqliteVoiceStore(db_path, style_shapes=PROMPT_SHAPES) as s:
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
    conn = sqlite3.connect(db_path)
    rows = conn.execute("SELECT COUNT(*) FROM voice_prompts").fetchone()
    conn.close()
    assert rows == (0,)
    assert b"opaque conditioning" not in db_path.read_bytes()


def test_store_validates_against_each_engines_style_shape(db_path: Path) -> None:
    with SqliteVoiceStore(db_path, style_shapes=PROMPT_SHAPES) as s:
        # Another engine's shape is fine for that engine, wrong for Kokoro.
        tiny = make_record(name="Tiny")
        tiny.engine, tiny.style = "tiny", np.ones((4, 8), np.float32)
        assert s.create(tiny).style is not None
        kokoro_sized = make_record(name="Big")
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
        style_with_prompt = make_record(name="Odd")
        style_with_prompt.prompt = b"x"
        with pytest.raises(InvalidInput, match="style array, not a reference prompt"):
            s.create(style_with_prompt)
        unknown = make_record(name="Who")
        unknown.engine = "nope"
        with pytest.raises(InvalidInput) as excinfo:
            s.create(unknown)
        assert excinfo.value.field == "engine"


def test_refuses_schema_from_the_future(db_path: Path) -> None:
    SqliteVoiceStore(db_path, style_shapes=SHAPES).close()
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE schema_version SET version = 99 WHERE component = 'voices'")
    conn.commit()
    conn.close()
    with pytest.raises(VoxcloneError, match="newer"):
        SqliteVoiceStore(db_path, style_shapes=SHAPES)


def test_failed_statement_rolls_back_whole_voice(db_path: Path) -> None:
    def fail_after_style(step: str) -> None:
        if step == "style":
            raise RuntimeError("disk full")

    with SqliteVoiceStore(db_path, style_shapes=SHAPES, statement_hook=fail_after_style) as s:
        with pytest.raises(RuntimeError):
            s.create(make_record())
        assert s.count() == 0
    with SqliteVoiceStore(db_path, style_shapes=SHAPES) as s:
        assert s.create(make_record()).version == 1  # name is free again


_CRASH_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    sys.path.insert(0, sys.argv[3])
    from test_voice_store import SHAPES, make_record
    from voxclone.runtime.voice_store import SqliteVoiceStore

    def stall(step):
        if step == "embedding":
            print("MIDWAY", flush=True)
            time.sleep(60)

    SqliteVoiceStore(Path(sys.argv[1]), style_shapes=SHAPES).create(make_record(name="Survivor"))
    store = SqliteVoiceStore(Path(sys.argv[1]), style_shapes=SHAPES, statement_hook=stall)
    store.create(make_record(name="Half", reference_audio=b"audio"))
    """
)


def test_sigkill_mid_create_leaves_whole_voice_or_nothing(db_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CRASH_SCRIPT,
            str(db_path),
            str(SRC_DIR),
            str(Path(__file__).parent),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "MIDWAY", proc.stderr.read() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    with SqliteVoiceStore(db_path, style_shapes=SHAPES) as s:
        names = [v.name for v in s.list(None)]
        assert names == ["Survivor"]
        survivor = s.list(None)[0].id
        assert s.get(survivor, None).style.shape == (510, 1, 256)
    # No orphan child rows from the half-written voice.
    conn = sqlite3.connect(db_path)
    for table in ("voice_consents", "voice_arrays", "voice_reference_audio"):
        orphans = conn.execute(
            f"SELECT COUNT(*) FROM {table} WHERE voice_id != ?", (survivor,)
        ).fetchone()
        assert orphans == (0,), table
    conn.close()
