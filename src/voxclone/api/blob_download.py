"""A stored blob as an HTTP response: streamed in parts, with byte ranges.

A book's audio (api/routes_audiobooks.py) is hundreds of MB (ten hours of
64 kb/s AAC: ~300 MB). Read whole with ``BlobStore.get`` it sat in one
request's memory, and a few downloads at once could exhaust the server's; here
it goes from the store to the socket a part at a time
(``BlobStore.open_chunks``, READ_PART_BYTES), with its Content-Length. A
``Range: bytes=`` request gets that span alone (206 + Content-Range), so a
player seeks in a ten-hour book without fetching what lies before.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping

from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.responses import JSONResponse, Response, StreamingResponse

from voxclone.errors import NotFound, VoxcloneError
from voxclone.runtime.blobs import BlobChunks, BlobNotFound, BlobStore

# One span of the bytes unit: "a-b", "a-" or "-n" (the last n bytes).
_SPAN = re.compile(r"^\s*(\d*)\s*-\s*(\d*)\s*$")


class RangeNotSatisfiable(VoxcloneError):
    """A Range that starts past the blob's end (416, with ``bytes */size``)."""

    status = 416
    code = "range_not_satisfiable"


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The span ``[start, end)`` a ``Range`` header asks of ``size`` bytes,
    or None for the whole blob: no header, another unit, several spans or a
    malformed one (RFC 9110 14.2: a server may ignore a Range it does not
    serve, and answer 200 with everything). Raises RangeNotSatisfiable for a
    span that holds none of the blob's bytes."""
    if header is None:
        return None
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    m = _SPAN.match(spec)
    if m is None or m.group(1) == m.group(2) == "":
        return None
    first, last = m.group(1), m.group(2)
    if first == "":  # the last n bytes
        n = int(last)
        if n == 0 or size == 0:
            raise _unsatisfiable(header, size)
        return max(0, size - n), size
    start = int(first)
    if last != "" and int(last) < start:
        return None  # "5-2" is invalid syntax: ignored, as the RFC says
    if start >= size:
        raise _unsatisfiable(header, size)
    end = size if last == "" else min(int(last) + 1, size)
    return start, end


def _unsatisfiable(header: str, size: int) -> RangeNotSatisfiable:
    return RangeNotSatisfiable(
        f"the range {header[:60]!r} is outside the file's {size} bytes "
        f"(bytes 0-{max(0, size - 1)})",
        field="Range",
        limit=size,
    )


async def blob_response(
    blobs: BlobStore,
    key: str,
    *,
    range_header: str | None,
    media_type: str,
    headers: Mapping[str, str],
    gone_field: str,
) -> Response:
    """The blob under ``key`` streamed (200, or 206 for a Range); a blob
    deleted meanwhile (a chapter re-rendered) is a 404 naming ``gone_field``."""
    try:
        if range_header is None:
            span = None
        else:
            size = await run_in_threadpool(blobs.size, key)
            try:
                span = parse_range(range_header, size)
            except RangeNotSatisfiable as exc:
                # Content-Range on a 416 says how long the file is (RFC 9110 15.5.17).
                return JSONResponse(
                    exc.to_body(),
                    status_code=exc.status,
                    headers={"Content-Range": f"bytes */{size}", **headers},
                )
        start, end = span if span is not None else (0, None)
        reader = await run_in_threadpool(blobs.open_chunks, key, start=start, end=end)
    except BlobNotFound:
        raise NotFound(
            "this file no longer exists (deleted or rendered again meanwhile); ask again",
            field=gone_field,
        ) from None
    out = {**headers, "Accept-Ranges": "bytes", "Content-Length": str(reader.length)}
    if span is not None:
        out["Content-Range"] = f"bytes {reader.start}-{reader.end - 1}/{reader.size}"
    return StreamingResponse(
        _chunks(reader), status_code=206 if span else 200, media_type=media_type, headers=out
    )


async def _chunks(reader: BlobChunks) -> AsyncIterator[bytes]:
    """The reader's parts, each read in a worker thread (a file or an S3
    body blocks); closed however the response ends, a client gone included."""
    try:
        async for chunk in iterate_in_threadpool(iter(reader)):
            yield chunk
    finally:
        reader.close()
