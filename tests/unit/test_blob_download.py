"""A stored blob served over HTTP (api/blob_download.py): the Range header's
spans, and a large blob streamed without being held whole in memory."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from starlette.responses import Response

from voxclone.api.blob_download import RangeNotSatisfiable, blob_response, parse_range
from voxclone.api.errors import install_error_handlers
from voxclone.runtime.blobs import READ_PART_BYTES, LocalBlobStore


@pytest.mark.parametrize(
    ("header", "span"),
    [
        (None, None),
        ("bytes=0-99", (0, 100)),
        ("bytes=100-", (100, 1000)),
        ("bytes=-10", (990, 1000)),
        ("bytes=-5000", (0, 1000)),  # more than the file: all of it
        ("bytes=990-5000", (990, 1000)),  # an end past the file is clipped
        ("BYTES = 5 - 9", (5, 10)),
        # Served whole (200), as RFC 9110 lets a server ignore a Range:
        ("bytes=0-1,5-9", None),  # several spans
        ("items=0-9", None),  # another unit
        ("bytes=9-5", None),  # malformed
        ("bytes=-", None),
        ("bytes=a-b", None),
    ],
)
def test_parse_range(header: str | None, span: tuple[int, int] | None) -> None:
    assert parse_range(header, 1000) == span


@pytest.mark.parametrize(
    ("header", "size"), [("bytes=1000-", 1000), ("bytes=-0", 1000), ("bytes=0-", 0)]
)
def test_a_range_outside_the_file_names_the_header_and_the_size(header: str, size: int) -> None:
    with pytest.raises(RangeNotSatisfiable) as caught:
        parse_range(header, size)
    assert caught.value.status == 416
    assert (caught.value.field, caught.value.limit) == ("Range", size)


def _app(blobs: LocalBlobStore, *, whole: bool = False) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)  # the 4xx JSON body, as the service's app has

    @app.get("/blob/{name}")
    async def blob(name: str, request: Request) -> Response:
        if whole:  # what the audiobook routes did before: the blob as one bytes object
            return Response(blobs.get(f"b/{name}"), media_type="audio/mp4")
        return await blob_response(
            blobs,
            f"b/{name}",
            range_header=request.headers.get("range"),
            media_type="audio/mp4",
            headers={"Content-Disposition": 'attachment; filename="x.m4b"'},
            gone_field="name",
        )

    return app


def test_ranges_and_a_missing_blob_over_http(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path / "blobs")
    data = bytes(range(256)) * 4000
    blobs.put("b/x.m4b", data, content_type="audio/mp4")
    with TestClient(_app(blobs), base_url="http://127.0.0.1") as c:
        whole = c.get("/blob/x.m4b")
        assert whole.status_code == 200 and whole.content == data
        assert whole.headers["content-length"] == str(len(data))
        assert whole.headers["accept-ranges"] == "bytes"
        assert whole.headers["content-disposition"] == 'attachment; filename="x.m4b"'
        part = c.get("/blob/x.m4b", headers={"Range": "bytes=1000-1999"})
        assert part.status_code == 206 and part.content == data[1000:2000]
        assert part.headers["content-range"] == f"bytes 1000-1999/{len(data)}"
        assert part.headers["content-length"] == "1000"
        last = c.get("/blob/x.m4b", headers={"Range": "bytes=-16"})
        assert last.status_code == 206 and last.content == data[-16:]
        past = c.get("/blob/x.m4b", headers={"Range": f"bytes={len(data)}-"})
        assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{len(data)}"
        error = past.json()["error"]
        assert (error["field"], error["limit"]) == ("Range", len(data))
        gone = c.get("/blob/gone.m4b")
        assert gone.status_code == 404 and gone.json()["error"]["field"] == "name"
        assert c.get("/blob/gone.m4b", headers={"Range": "bytes=0-9"}).status_code == 404


def _peak_download(app: FastAPI) -> tuple[int, int]:
    """(bytes received, the peak of Python's allocations during the download)."""
    received = 0
    with TestClient(app, base_url="http://127.0.0.1") as c:
        tracemalloc.start()
        try:
            with c.stream("GET", "/blob/big.m4b") as response:
                assert response.status_code == 200
                for chunk in response.iter_bytes():
                    received += len(chunk)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return received, peak


def test_a_large_blob_is_streamed_not_held_whole(tmp_path: Path) -> None:
    # A ten-hour book is ~300 MB; 32 MB stands for it here. Read whole, the
    # download's peak is the blob (and more); streamed, a few parts.
    blobs = LocalBlobStore(tmp_path / "blobs")
    size = 32 << 20
    path = blobs.path("b/big.m4b")
    path.parent.mkdir()
    with path.open("wb") as f:
        for _ in range(size // READ_PART_BYTES):
            f.write(b"\x5a" * READ_PART_BYTES)
    received, streamed = _peak_download(_app(blobs))
    assert received == size
    assert streamed < 8 * READ_PART_BYTES, streamed
    received, whole = _peak_download(_app(blobs, whole=True))
    assert received == size and whole > size  # the old way, for the contrast
