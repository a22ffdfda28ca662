"""The local blob store: atomic writes, safe keys, S3-like prefix deletion."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from voxclone.runtime.blobs import BlobNotFound, BlobStore, LocalBlobStore


def test_put_get_replace_and_missing(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    assert isinstance(store, BlobStore)
    store.put("jobs/a.wav", b"one", content_type="audio/wav")
    store.put("jobs/a.wav", b"two", content_type="audio/wav")
    assert store.get("jobs/a.wav") == b"two"
    assert store.exists("jobs/a.wav") and not store.exists("jobs/b.wav")
    with pytest.raises(BlobNotFound):
        store.get("jobs/b.wav")
    mode = stat.S_IMODE(store.path("jobs/a.wav").stat().st_mode)
    assert mode & 0o077 == 0, oct(mode)  # someone's voice: owner only
    assert store.presigned_url("jobs/a.wav", expires_s=60) is None


@pytest.mark.parametrize("key", ["../x", "/etc/passwd", "a/../../x", "a//b", "a/./b", "a\x00b", ""])
def test_keys_cannot_leave_the_root(tmp_path: Path, key: str) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    with pytest.raises(ValueError):
        store.put(key, b"x", content_type="application/octet-stream")


def test_delete_prefix_removes_only_what_it_names(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    for key in ("voices/ab/ref.flac", "voices/ab/cond/x.npy", "voices/abc/ref.flac", "jobs/ab.wav"):
        store.put(key, b"x", content_type="application/octet-stream")
    assert store.delete_prefix("voices/ab/") == 2
    assert store.exists("voices/abc/ref.flac") and store.exists("jobs/ab.wav")
    assert not (tmp_path / "blobs" / "voices" / "ab").exists()
    assert store.delete_prefix("voices/zz/") == 0
    assert store.delete_prefix("jobs/ab") == 1
