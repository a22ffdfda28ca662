"""Kept reference audio in the blob store, and voice deletion purging the blobs.

Each test taking ``blob_store`` runs on the local directory store and on S3 (a
real S3 endpoint: moto's server, tests/conftest.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fakes import voice_record
from pre_alembic import EXPECTED, thaw

from voxclone.bootstrap import voice_purge
from voxclone.errors import Conflict, VoxcloneError
from voxclone.runtime.blobs import BlobStore, voice_reference_key
from voxclone.runtime.blobs_s3 import S3BlobStore
from voxclone.runtime.db import open_database
from voxclone.runtime.job_store import JobEvents, SqlJobStore
from voxclone.runtime.voice_store import SqlVoiceStore
from voxclone.service.purge import CachePurger
from voxclone.service.voices.service import VoiceService
from voxclone.service.voices.setup import CloningKit, VoiceHooks, VoiceStores

SHAPES: dict[str, tuple[int, ...] | None] = {"kokoro": (510, 1, 256)}
# Recognisable bytes: the test looks for them in the raw database file.
AUDIO = b"RIFF-kept-reference-" + bytes(range(256)) * 16


# The voices here keep their reference recording unless a test says otherwise.
record = partial(voice_record, reference_audio=AUDIO)


@pytest.fixture()
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "voxclone.sqlite3"


@pytest.fixture()
def store(db_file: Path, blob_store: BlobStore) -> Iterator[SqlVoiceStore]:
    with SqlVoiceStore(db_file, style_shapes=SHAPES, blobs=blob_store) as s:
        yield s


def stored_audio_lengths(db_file: Path) -> dict[str, int]:
    conn = sqlite3.connect(db_file)
    rows = conn.execute("SELECT voice_id, length(audio) FROM voice_reference_audio").fetchall()
    conn.close()
    return dict(rows)


def test_a_new_voice_keeps_its_reference_in_the_blob_store_not_the_database(
    store: SqlVoiceStore, blob_store: BlobStore, db_file: Path
) -> None:
    created = store.create(record("Alice"))
    assert created.reference_audio == AUDIO
    assert blob_store.get(f"voices/{created.id}/reference") == AUDIO
    assert stored_audio_lengths(db_file) == {created.id: 0}  # a marker, no bytes
    assert AUDIO[:40] not in db_file.read_bytes()

    assert store.get(created.id, "owner-a").reference_audio == AUDIO
    assert store.get(created.id, "owner-a", include_reference_audio=False).reference_audio is None
    found = store.find_by_name("alice", "owner-a", include_reference_audio=False)
    assert found is not None and found.reference_audio is None
    assert [s.has_reference_audio for s in store.list("owner-a")] == [True]

    plain = store.create(record("Bob", seed=1, reference_audio=None))
    assert store.get(plain.id, "owner-a").reference_audio is None
    assert not blob_store.exists(f"voices/{plain.id}/reference")


def test_deleting_a_voice_deletes_everything_under_its_prefix(
    store: SqlVoiceStore, blob_store: BlobStore
) -> None:
    gone = store.create(record("Alice"))
    kept = store.create(record("Bob", seed=1))
    # Anything else a voice may own later (conditioning too big for a row...).
    blob_store.put(f"voices/{gone.id}/cond/pack.bin", b"x", content_type="application/octet-stream")

    store.delete(gone.id, "owner-a")

    assert not blob_store.exists(f"voices/{gone.id}/reference")
    assert not blob_store.exists(f"voices/{gone.id}/cond/pack.bin")
    assert blob_store.get(f"voices/{kept.id}/reference") == AUDIO
    assert store.get(kept.id, "owner-a").reference_audio == AUDIO


def test_dropping_the_reference_deletes_its_blob(
    store: SqlVoiceStore, blob_store: BlobStore
) -> None:
    voice = store.create(record("Alice"))
    assert store.drop_reference_audio(voice.id, "owner-a") is True
    assert not blob_store.exists(voice_reference_key(voice.id))
    assert store.get(voice.id, "owner-a").reference_audio is None
    assert [s.has_reference_audio for s in store.list("owner-a")] == [False]
    assert store.drop_reference_audio(voice.id, "owner-a") is False


def test_a_refused_create_leaves_no_blob_and_never_overwrites_one(
    store: SqlVoiceStore, blob_store: BlobStore
) -> None:
    first = store.create(record("Alice", id="v_first"))
    with pytest.raises(Conflict):  # the name is taken: the new blob is removed again
        store.create(record("alice", id="v_second", reference_audio=b"RIFF-second"))
    assert not blob_store.exists("voices/v_second/reference")
    with pytest.raises(Conflict):  # the id is taken: the first voice's blob is untouched
        store.create(record("Carol", id="v_first", reference_audio=b"RIFF-intruder"))
    assert store.get(first.id, "owner-a").reference_audio == AUDIO


def test_voices_whose_audio_is_in_the_database_keep_working(
    db_file: Path, blob_store: BlobStore
) -> None:
    # Written by the last version before Alembic (tests/data/pre_alembic), then
    # by today's store without a blob store: both keep the bytes in the row.
    thaw("audio_in_row.sqlite3", db_file)
    old_id = EXPECTED["audio_in_row"]["id"]
    with SqlVoiceStore(db_file, style_shapes=SHAPES) as without_blobs:
        recent = without_blobs.create(record("Recent", seed=1, reference_audio=b"RIFF-in-a-row"))

    with SqlVoiceStore(db_file, style_shapes=SHAPES, blobs=blob_store) as voices:
        assert voices.get(old_id, "owner-a").reference_audio == b"RIFF-legacy-v0"
        assert voices.get(recent.id, "owner-a").reference_audio == b"RIFF-in-a-row"
        assert [s.has_reference_audio for s in voices.list("owner-a")] == [True, True]
        new = voices.create(record("New", seed=2))
        assert stored_audio_lengths(db_file) == {
            old_id: len(b"RIFF-legacy-v0"),
            recent.id: len(b"RIFF-in-a-row"),
            new.id: 0,
        }
        voices.delete(old_id, "owner-a")
        assert voices.drop_reference_audio(recent.id, "owner-a") is True
        assert stored_audio_lengths(db_file) == {new.id: 0}
        assert voices.get(new.id, "owner-a").reference_audio == AUDIO


def test_a_process_without_the_blob_store_says_so(db_file: Path, blob_store: BlobStore) -> None:
    with SqlVoiceStore(db_file, style_shapes=SHAPES, blobs=blob_store) as voices:
        voice = voices.create(record("Alice"))
    with SqlVoiceStore(db_file, style_shapes=SHAPES) as blind:
        with pytest.raises(VoxcloneError, match="VOXCLONE_S3_"):
            blind.get(voice.id, "owner-a")
        assert blind.get(voice.id, "owner-a", include_reference_audio=False).id == voice.id


def test_the_voice_service_delete_purges_the_blobs(db_file: Path, blob_store: BlobStore) -> None:
    db = open_database(db_file)
    store = SqlVoiceStore(db, style_shapes=SHAPES, blobs=blob_store)
    jobs = SqlJobStore(db)
    changed: list[str] = []
    purger = CachePurger(store, voice_purge(store, changed.append))
    service = VoiceService(  # deletion never clones: no cloning kit
        VoiceStores(voices=store, jobs=jobs, job_events=JobEvents()),
        CloningKit(),
        VoiceHooks(on_voice_changed=changed.append, purge=purger.purge),
    )
    try:
        voice = store.create(record("Alice"))
        deleted = service.delete(voice.id, "owner-a")
        assert deleted.purge_pending is False and changed == [voice.id]
        assert not blob_store.exists(voice_reference_key(voice.id))
        assert store.pending_purges() == []
    finally:
        service.close()
        jobs.close()
        store.close()
        db.close()


def test_a_blob_purge_the_store_could_not_do_stays_owed_until_done(
    db_file: Path, s3_endpoint: Any
) -> None:
    """S3 unreachable from the replica that deletes: the purge is journaled and a
    replica that reaches S3 finishes it; the debt is not dropped on the way."""
    bucket = s3_endpoint.create_bucket()
    reachable = S3BlobStore(bucket, endpoint_url=s3_endpoint.url)
    dead_url = "http://127.0.0.1:9"  # discard port: nothing listens, refused at once
    unreachable = S3BlobStore(bucket, endpoint_url=dead_url, max_attempts=1)
    with SqlVoiceStore(db_file, style_shapes=SHAPES, blobs=reachable) as a:
        voice = a.create(record("Alice"))
    with SqlVoiceStore(db_file, style_shapes=SHAPES, blobs=unreachable) as b:
        b.delete(voice.id, "owner-a")  # the row goes; the blob cannot
        assert CachePurger(b, voice_purge(b, None)).purge(voice.id) is False
        assert [p.voice_id for p in b.pending_purges()] == [voice.id]
    assert reachable.exists(voice_reference_key(voice.id))
    with SqlVoiceStore(db_file, style_shapes=SHAPES, blobs=reachable) as a:
        assert CachePurger(a, voice_purge(a, None)).run_pending() == 0
        assert a.pending_purges() == []
    assert not reachable.exists(voice_reference_key(voice.id))


def test_cli_voices_delete_purges_the_blobs_on_s3(
    tmp_path: Path, s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voxclone.api.cli import main
    from voxclone.config import Settings

    home = tmp_path / "home"
    bucket = s3_endpoint.create_bucket()
    monkeypatch.setenv("VOXCLONE_HOME", str(home))
    monkeypatch.setenv("VOXCLONE_S3_BUCKET", bucket)
    monkeypatch.setenv("VOXCLONE_S3_ENDPOINT_URL", s3_endpoint.url)
    monkeypatch.setenv("VOXCLONE_MEMORY_CACHE_MB", "0")
    s3 = S3BlobStore(bucket, endpoint_url=s3_endpoint.url)
    home.mkdir()
    with SqlVoiceStore(Settings().db_path, style_shapes=SHAPES, blobs=s3) as voices:
        voice = voices.create(record("Alice"))
    assert s3.exists(voice_reference_key(voice.id))

    assert main(["voices", "delete", voice.id]) == 0

    assert not s3.exists(voice_reference_key(voice.id))
    with SqlVoiceStore(Settings().db_path, style_shapes=SHAPES, blobs=s3) as voices:
        assert voices.count() == 0 and voices.pending_purges() == []
