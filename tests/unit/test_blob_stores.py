"""One behaviour for both blob stores: the local directory and S3 (moto's server).

The ``blob_store`` fixture (tests/conftest.py) runs each test once per store; the
S3 one talks HTTP to a real S3 endpoint through boto3, with a key prefix.
"""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from voxclone.bootstrap import build_blob_store, check_blob_store
from voxclone.config import Settings
from voxclone.devserver import free_loopback_port
from voxclone.runtime import blobs_s3
from voxclone.runtime.blobs import (
    READ_PART_BYTES,
    BlobNotFound,
    BlobStore,
    LocalBlobStore,
    voice_prefix,
)
from voxclone.runtime.blobs_s3 import S3BlobStore


def test_put_get_replace_exists_and_missing(blob_store: BlobStore) -> None:
    assert isinstance(blob_store, BlobStore)
    blob_store.put("jobs/a.wav", b"one", content_type="audio/wav")
    blob_store.put("jobs/a.wav", b"two" * 1000, content_type="audio/wav")
    assert blob_store.get("jobs/a.wav") == b"two" * 1000
    assert blob_store.exists("jobs/a.wav")
    assert not blob_store.exists("jobs/b.wav") and not blob_store.exists("jobs")
    with pytest.raises(BlobNotFound):
        blob_store.get("jobs/b.wav")
    blob_store.check()  # usable: no exception


class _Reads:
    """A file whose reads are counted: a store must read it in parts."""

    def __init__(self, data: bytes) -> None:
        import io

        self._file = io.BytesIO(data)
        self.largest = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self._file.read(size)
        self.largest = max(self.largest, len(chunk))
        return chunk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


def test_put_file_stores_a_long_file_read_in_parts(blob_store: BlobStore) -> None:
    # A speech job's audio (issue 45: up to hours) goes from its spool file to
    # the store in parts (S3: a multipart upload), never as one bytes object.
    data = bytes(range(256)) * (20 * 4096 + 7)  # ~20 MiB: three 8 MiB parts
    source = _Reads(b"header" + data)
    source.seek(6)  # from the file's position to its end
    blob_store.put_file("jobs/long.wav", source, content_type="audio/wav")  # type: ignore[arg-type]
    assert blob_store.get("jobs/long.wav") == data
    assert 0 < source.largest <= 8 << 20
    assert not blob_store.exists("jobs/other.wav")


def test_open_chunks_reads_a_blob_in_parts_whole_or_a_span(blob_store: BlobStore) -> None:
    # What a book's audio download reads (api/blob_download.py): parts of at
    # most READ_PART_BYTES, never the whole blob as one bytes object.
    data = bytes(range(256)) * (3 * READ_PART_BYTES // 256) + b"tail"
    blob_store.put("audiobooks/b1/x.m4b", data, content_type="audio/mp4")
    assert blob_store.size("audiobooks/b1/x.m4b") == len(data)
    with blob_store.open_chunks("audiobooks/b1/x.m4b") as whole:
        n = len(data)
        assert (whole.size, whole.start, whole.end, whole.length) == (n, 0, n, n)
        parts = list(whole)
    assert b"".join(parts) == data
    assert len(parts) >= 4 and max(map(len, parts)) <= READ_PART_BYTES
    assert whole.closed  # read to its end: the file or connection is freed
    # A span, as a Range request asks: [start, end); an end past the blob is clipped.
    span = blob_store.open_chunks("audiobooks/b1/x.m4b", start=100, end=READ_PART_BYTES + 300)
    assert (span.size, span.start, span.end) == (len(data), 100, READ_PART_BYTES + 300)
    assert b"".join(span) == data[100 : READ_PART_BYTES + 300]
    tail = blob_store.open_chunks("audiobooks/b1/x.m4b", start=len(data) - 4, end=len(data) + 99)
    assert (tail.length, b"".join(tail)) == (4, b"tail")
    # Closed unread (a client that went away): nothing more is read.
    dropped = blob_store.open_chunks("audiobooks/b1/x.m4b")
    dropped.close()
    assert dropped.closed and list(dropped) == []
    with pytest.raises(ValueError):
        blob_store.open_chunks("audiobooks/b1/x.m4b", start=len(data))
    with pytest.raises(ValueError):
        blob_store.open_chunks("audiobooks/b1/x.m4b", start=5, end=5)


def test_open_chunks_and_size_of_a_missing_blob_raise_blob_not_found(
    blob_store: BlobStore,
) -> None:
    blob_store.put("audiobooks/b1/other.m4b", b"x", content_type="audio/mp4")
    with pytest.raises(BlobNotFound):
        blob_store.open_chunks("audiobooks/b1/gone.m4b")
    with pytest.raises(BlobNotFound):
        blob_store.open_chunks("audiobooks/b1/gone.m4b", start=10, end=20)
    with pytest.raises(BlobNotFound):
        blob_store.size("audiobooks/b1/gone.m4b")
    with pytest.raises(ValueError):  # an unsafe key, as for every other call
        blob_store.open_chunks("../x")


@pytest.mark.parametrize("key", ["../x", "/etc/passwd", "a/../../x", "a//b", "a\x00b", ""])
def test_unsafe_keys_are_refused(blob_store: BlobStore, key: str) -> None:
    with pytest.raises(ValueError):
        blob_store.put(key, b"x", content_type="application/octet-stream")
    with pytest.raises(ValueError):
        blob_store.delete_prefix(key)


def test_delete_prefix_removes_only_what_it_names(blob_store: BlobStore) -> None:
    keys = ("voices/ab/reference", "voices/ab/cond/x.npy", "voices/abc/reference", "jobs/ab.wav")
    for key in keys:
        blob_store.put(key, b"x", content_type="application/octet-stream")
    assert blob_store.delete_prefix(voice_prefix("ab")) == 2
    assert not blob_store.exists("voices/ab/reference")
    assert not blob_store.exists("voices/ab/cond/x.npy")
    assert blob_store.exists("voices/abc/reference") and blob_store.exists("jobs/ab.wav")
    assert blob_store.delete_prefix("voices/zz/") == 0
    assert blob_store.delete_prefix("jobs/ab") == 1


def test_presigned_url_is_plain_http_and_carries_its_expiry(blob_store: BlobStore) -> None:
    blob_store.put("jobs/j1.wav", b"RIFF-audio", content_type="audio/wav")
    url = blob_store.presigned_url("jobs/j1.wav", expires_s=120)
    if isinstance(blob_store, LocalBlobStore):
        # No URLs of its own: the API signs a link to its download route instead.
        assert url is None
        return
    assert url is not None
    with urllib.request.urlopen(url, timeout=10) as response:  # no SDK, no credentials
        assert response.read() == b"RIFF-audio"
    # What AWS and MinIO check before serving it (moto does not enforce expiry):
    # a SigV4 query signature that expires 120 s after it was made.
    query = parse_qs(urlsplit(url).query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert query["X-Amz-Expires"] == ["120"]
    signed_at = time.mktime(time.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ"))
    assert abs(signed_at - time.mktime(time.gmtime())) < 60
    with pytest.raises(ValueError):
        blob_store.presigned_url("jobs/j1.wav", expires_s=8 * 24 * 3600)


# -- S3 only ---------------------------------------------------------------------


def test_s3_keys_live_under_the_prefix_and_prefixes_do_not_mix(s3_endpoint: Any) -> None:
    bucket = s3_endpoint.create_bucket()
    a = S3BlobStore(bucket, prefix="/deploy-a/", endpoint_url=s3_endpoint.url)
    b = S3BlobStore(bucket, prefix="deploy-b", endpoint_url=s3_endpoint.url)
    a.put("voices/v1/reference", b"a", content_type="application/octet-stream")
    b.put("voices/v1/reference", b"b", content_type="application/octet-stream")
    listed = s3_endpoint.client().list_objects_v2(Bucket=bucket)["Contents"]
    assert sorted(o["Key"] for o in listed) == [
        "deploy-a/voices/v1/reference",
        "deploy-b/voices/v1/reference",
    ]
    assert b.delete_prefix("voices/v1/") == 1
    assert a.get("voices/v1/reference") == b"a"


def test_s3_delete_prefix_pages_and_batches(
    s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small pages and batches so a handful of objects crosses both boundaries
    # (production: 1000 keys per listing page and per DeleteObjects call).
    monkeypatch.setattr(blobs_s3, "DELETE_BATCH", 3)
    monkeypatch.setattr(blobs_s3, "LIST_PAGE", 2)
    store = S3BlobStore(s3_endpoint.create_bucket(), endpoint_url=s3_endpoint.url)
    calls: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        calls.append(len(params["Delete"]["Objects"]))

    # What boto3 is about to send: one entry per DeleteObjects request.
    store._client.meta.events.register("provide-client-params.s3.DeleteObjects", count)
    for i in range(7):
        store.put(f"voices/v9/part{i}", b"x", content_type="application/octet-stream")
    store.put("voices/v10/part", b"x", content_type="application/octet-stream")
    assert store.delete_prefix("voices/v9/") == 7
    assert calls == [3, 3, 1]
    assert store.exists("voices/v10/part") and not store.exists("voices/v9/part6")


def test_check_names_a_missing_bucket(s3_endpoint: Any) -> None:
    settings = Settings(s3_bucket="no-such-bucket", s3_endpoint_url=s3_endpoint.url)
    problem = check_blob_store(settings)
    assert problem is not None
    assert "'no-such-bucket' does not exist" in problem and "VOXCLONE_S3_BUCKET" in problem


def test_check_names_missing_credentials(s3_endpoint: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-role probe
    monkeypatch.setattr(blobs_s3, "_session", None)  # a fresh process resolves them anew
    settings = Settings(s3_bucket=s3_endpoint.create_bucket(), s3_endpoint_url=s3_endpoint.url)
    problem = check_blob_store(settings)
    assert problem is not None and "no AWS credentials" in problem


def test_check_names_an_unreachable_endpoint() -> None:
    url = f"http://127.0.0.1:{free_loopback_port()}"  # nothing listens there
    problem = check_blob_store(Settings(s3_bucket="b-1", s3_endpoint_url=url, s3_timeout_s=1))
    assert problem is not None and "cannot reach" in problem and url in problem


def test_a_server_without_s3_never_imports_boto3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules makes any import of the name fail, as if not installed.
    monkeypatch.setitem(sys.modules, "boto3", None)
    monkeypatch.setitem(sys.modules, "voxclone.runtime.blobs_s3", None)
    assert build_blob_store(Settings(home=tmp_path)).name == "local"
    assert check_blob_store(Settings(home=tmp_path)) is None
    with pytest.raises(ImportError):  # the guard above is real: S3 would need it
        build_blob_store(Settings(home=tmp_path, s3_bucket="b-1"))


def test_the_composition_root_picks_the_store(tmp_path: Path, s3_endpoint: Any) -> None:
    local = build_blob_store(Settings(home=tmp_path))
    assert isinstance(local, LocalBlobStore) and local.name == "local"
    assert local.root == tmp_path / "blobs"
    s3 = build_blob_store(
        Settings(home=tmp_path, s3_bucket="bkt-1", s3_endpoint_url=s3_endpoint.url, s3_prefix="p")
    )
    assert isinstance(s3, S3BlobStore) and (s3.name, s3.bucket, s3.prefix) == ("s3", "bkt-1", "p/")


# -- start-up and readiness --------------------------------------------------------


def test_serve_refuses_a_missing_bucket_in_one_readable_line(
    tmp_path: Path,
    s3_endpoint: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from voxclone.api.cli import main
    from voxclone.api.server import EXIT_REFUSED

    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VOXCLONE_S3_BUCKET", "missing-bucket")
    monkeypatch.setenv("VOXCLONE_S3_ENDPOINT_URL", s3_endpoint.url)
    assert main(["serve"]) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert "voxclone: error: the S3 bucket 'missing-bucket' does not exist" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_replica_without_its_bucket_fails_start_up_in_one_log_line(
    tmp_path: Path, s3_endpoint: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # The path Ray Serve and embedded apps take (no `voxclone serve` pre-check):
    # build_runtime checks the store before loading any model.
    from fastapi.testclient import TestClient

    from voxclone.api.app import create_app

    settings = Settings(home=tmp_path / "home", s3_bucket="gone", s3_endpoint_url=s3_endpoint.url)
    app = create_app(settings, load_in_background=False)
    with (
        pytest.raises(RuntimeError, match="BlobStoreUnavailable"),
        TestClient(app, base_url="http://127.0.0.1"),
    ):
        pass
    logged = [r for r in caplog.records if "start-up failed" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is None
    assert "'gone' does not exist" in logged[0].getMessage()


def test_readyz_detail_names_the_blob_store(tmp_path: Path, s3_endpoint: Any) -> None:
    from types import SimpleNamespace

    from voxclone.api.routes_admin import _dependencies

    for store, name in (
        (LocalBlobStore(tmp_path / "blobs"), "local"),
        (S3BlobStore(s3_endpoint.create_bucket(), endpoint_url=s3_endpoint.url), "s3"),
    ):
        runtime = SimpleNamespace(cache=None, purger=None, blobs=store)
        state = SimpleNamespace(rate_limiter=None, runtime=runtime)
        assert _dependencies(state)["blobs"] == name
