"""Blob storage: bytes under a key, one interface for a local directory and S3.

What goes here is what a database row should not hold: generated audio that a job
hands out as a URL, reference audio when a voice keeps it, conditioning too large for a
row. Keys are relative, slash-separated paths (``jobs/<id>.wav``, ``voices/<id>/ref.flac``)
so that deleting a voice can purge everything under its prefix in one call.
Small blobs are read whole (``get``); a download of a long one (a book's audio,
hundreds of MB) reads it in parts (``open_chunks``, a span of it for a Range).

The local store is the embedded default (``VOXCLONE_HOME/blobs``); an S3-compatible
store is chosen by the composition root when ``VOXCLONE_S3_*`` is set. Both give out
URLs that expire: S3 presigns them, the local store has none of its own and returns
``None`` so that the HTTP layer signs one for its own download route.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Protocol, runtime_checkable

from voxclone.errors import VoxcloneError
from voxclone.synth.files import TMP_PREFIX, atomic_writer, write_atomically

# Keys are built by the service, never taken from a request as-is; this pattern still
# refuses anything that could leave the store's root (``..``, absolute paths, NULs).
# The part a stored file is copied (or uploaded, S3 multipart) in: 8 MiB.
COPY_PART_BYTES = 8 << 20
# The part a blob is read in for a download (BlobStore.open_chunks): what one
# request holds of a book's audio at a time instead of all of it (~300 MB for
# ten hours of 64 kb/s AAC). 256 KiB: ~1,200 thread hops for such a book.
READ_PART_BYTES = 256 << 10
_KEY = re.compile(r"^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*$")


class BlobNotFound(KeyError):
    """No blob is stored under the key."""


class BlobStoreUnavailable(VoxcloneError):
    """The blob store cannot be reached or refuses us (S3 down, bad credentials).

    A 503 for a request that needed it; at start-up its message is printed as is.
    """

    status = 503
    code = "blob_store_unavailable"


class BlobChunks:
    """An opened blob, read in parts: ``size`` is the whole blob's bytes,
    iterating gives the bytes from ``start`` (up to ``end``) in chunks of at
    most the store's part size; ``close()`` (or reading to the end, or
    ``with``) frees the file or connection."""

    def __init__(
        self, *, size: int, start: int, end: int, chunks: Iterator[bytes], close: Callable[[], None]
    ) -> None:
        self.size = size
        self.start = start
        self.end = end  # exclusive
        self._chunks = chunks
        self._close = close
        self._closed = False

    @property
    def length(self) -> int:
        """How many bytes iterating gives."""
        return self.end - self.start

    @property
    def closed(self) -> bool:
        return self._closed

    def __iter__(self) -> Iterator[bytes]:
        if self._closed:
            return
        try:
            yield from self._chunks
        finally:
            self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()

    def __enter__(self) -> BlobChunks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_span(start: int, end: int | None) -> None:
    """``start``/``end`` of :meth:`BlobStore.open_chunks`: a non-empty span."""
    if start < 0 or (end is not None and end <= start):
        raise ValueError(f"invalid blob span {start}-{end}")


def voice_prefix(voice_id: str) -> str:
    """Where every blob of one voice lives; deleting the voice deletes this prefix."""
    if "/" in voice_id:
        raise ValueError(f"invalid voice id {voice_id!r}")
    return f"voices/{check_key(voice_id)}/"


def voice_reference_key(voice_id: str) -> str:
    """The kept reference recording of a voice (the bytes as uploaded)."""
    return voice_prefix(voice_id) + "reference"


def check_key(key: str) -> str:
    """Return ``key`` if it is a safe relative blob key, else raise ValueError."""
    if not _KEY.match(key) or any(part in {".", ".."} for part in key.split("/")):
        raise ValueError(f"invalid blob key {key!r}")
    return key


@runtime_checkable
class BlobStore(Protocol):
    """Where bytes too big (or too public) for a database row live."""

    name: str

    def put(self, key: str, data: bytes, *, content_type: str) -> None:
        """Store ``data`` under ``key`` (replacing what was there) atomically."""
        ...

    def put_file(self, key: str, source: IO[bytes], *, content_type: str) -> None:
        """Store what ``source`` holds from its position to its end under
        ``key``, atomically, read in parts (a job's audio may be hours long:
        it is never held whole in memory)."""
        ...

    def get(self, key: str) -> bytes:
        """The bytes under ``key``; raises BlobNotFound."""
        ...

    def open_chunks(self, key: str, *, start: int = 0, end: int | None = None) -> BlobChunks:
        """The blob under ``key`` opened for reading in parts, from byte
        ``start`` up to ``end`` (exclusive; None: its end), never held whole
        in memory (a book's audio is hundreds of MB); raises BlobNotFound at
        once, ValueError for a span that starts past the blob's end."""
        ...

    def size(self, key: str) -> int:
        """How many bytes are stored under ``key``; raises BlobNotFound."""
        ...

    def exists(self, key: str) -> bool: ...

    def delete_prefix(self, prefix: str) -> int:
        """Delete every blob whose key starts with ``prefix``; return how many."""
        ...

    def presigned_url(self, key: str, *, expires_s: int) -> str | None:
        """A URL anyone can GET until it expires, or None if the store has no URLs
        of its own (the API then signs a link to its own download route)."""
        ...

    def check(self) -> None:
        """Raise BlobStoreUnavailable (readable message) if the store cannot be used;
        called once at start-up."""
        ...


class LocalBlobStore:
    """Blobs as files under one directory (the single-machine default).

    Writes go to a temporary file in the same directory and are renamed into place, so
    a reader (or a process killed mid-write) never sees half a blob. Files are 0600 like
    the rest of the data directory: they may hold someone's voice.
    """

    name = "local"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)

    def path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put(self, key: str, data: bytes, *, content_type: str) -> None:
        del content_type  # a file has none; the download route derives it from the key
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomically(target, data)

    def put_file(self, key: str, source: IO[bytes], *, content_type: str) -> None:
        del content_type
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with atomic_writer(target) as handle:
            shutil.copyfileobj(source, handle, COPY_PART_BYTES)

    def get(self, key: str) -> bytes:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            raise BlobNotFound(key) from None

    def open_chunks(self, key: str, *, start: int = 0, end: int | None = None) -> BlobChunks:
        check_span(start, end)
        try:
            # The open file stays readable if the blob is replaced or deleted
            # meanwhile (a rename or unlink leaves this inode to the reader).
            handle = self.path(key).open("rb")
        except FileNotFoundError:
            raise BlobNotFound(key) from None
        size = os.fstat(handle.fileno()).st_size
        stop = size if end is None else min(end, size)
        if start and start >= size:
            handle.close()
            raise ValueError(f"blob span starts at {start}, past its end ({size} bytes)")
        handle.seek(start)

        def chunks() -> Iterator[bytes]:
            left = max(0, stop - start)
            while left > 0 and (chunk := handle.read(min(READ_PART_BYTES, left))):
                left -= len(chunk)
                yield chunk

        return BlobChunks(
            size=size, start=start, end=max(start, stop), chunks=chunks(), close=handle.close
        )

    def size(self, key: str) -> int:
        try:
            return self.path(key).stat().st_size
        except FileNotFoundError:
            raise BlobNotFound(key) from None

    def exists(self, key: str) -> bool:
        return self.path(key).is_file()

    def delete_prefix(self, prefix: str) -> int:
        # Same meaning as an S3 prefix: "voices/ab" also matches "voices/abc/x", so the
        # service always passes a prefix ending in "/" for a voice's blobs. The walk starts
        # at the deepest directory the prefix names, not at the root.
        check_key(prefix.rstrip("/"))
        start = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not start.is_dir():
            return 0
        removed = 0
        for path in sorted(start.rglob("*"), reverse=True):
            key = path.relative_to(self.root).as_posix()
            if path.is_file() and key.startswith(prefix) and not path.name.startswith(TMP_PREFIX):
                path.unlink()
                removed += 1
            elif path.is_dir() and key.startswith(prefix.rstrip("/")) and not any(path.iterdir()):
                path.rmdir()
        if start != self.root and prefix.endswith("/") and not any(start.iterdir()):
            start.rmdir()
        return removed

    def presigned_url(self, key: str, *, expires_s: int) -> str | None:
        del key, expires_s
        return None

    def check(self) -> None:
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise BlobStoreUnavailable(f"the blob directory {self.root} is not writable")
