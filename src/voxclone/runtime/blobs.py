"""Blob storage: bytes under a key, one interface for a local directory and S3.

What goes here is what a database row should not hold: generated audio that a job
hands out as a URL, reference audio when a voice keeps it, conditioning too large for a
row. Keys are relative, slash-separated paths (``jobs/<id>.wav``, ``voices/<id>/ref.flac``)
so that deleting a voice can purge everything under its prefix in one call.

The local store is the embedded default (``VOXCLONE_HOME/blobs``); an S3-compatible
store is chosen by the composition root when ``VOXCLONE_S3_*`` is set. Both give out
URLs that expire: S3 presigns them, the local store has none of its own and returns
``None`` so that the HTTP layer signs one for its own download route.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import IO, Protocol, runtime_checkable

from voxclone.errors import VoxcloneError
from voxclone.synth.files import TMP_PREFIX, atomic_writer, write_atomically

# Keys are built by the service, never taken from a request as-is; this pattern still
# refuses anything that could leave the store's root (``..``, absolute paths, NULs).
# The part a stored file is copied (or uploaded, S3 multipart) in: 8 MiB.
COPY_PART_BYTES = 8 << 20
_KEY = re.compile(r"^[A-Za-z0-9_.=-]+(/[A-Za-z0-9_.=-]+)*$")


class BlobNotFound(KeyError):
    """No blob is stored under the key."""


class BlobStoreUnavailable(VoxcloneError):
    """The blob store cannot be reached or refuses us (S3 down, bad credentials).

    A 503 for a request that needed it; at start-up its message is printed as is.
    """

    status = 503
    code = "blob_store_unavailable"


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
