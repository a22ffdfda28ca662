"""File helpers shared by the model loaders and the stores.

Every file voxclone writes for later readers (cache entries, blobs, model
graphs, the URL-signing secret) goes through :func:`atomic_writer` /
:func:`write_atomically`: the bytes go to a temporary file beside the target,
are fsynced, then renamed over it, so a reader (another process, or this one
after a crash) sees the old file, no file, or the whole new one, never a
half-written one. Temporary names start with :data:`TMP_PREFIX`, which the
directory scans (disk cache, local blob store) skip and sweep.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

TMP_PREFIX = ".tmp-"
# Private: VOXCLONE_HOME holds biometric data, and model files are written
# 0600 like the rest of it whatever the umask (synth/built_models.py).
PRIVATE_MODE = 0o600


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks (model files are large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def temp_path_for(path: Path) -> Path:
    """A fresh temporary name in ``path``'s directory (same file system, so
    the final rename is atomic); unique per process and call."""
    return path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}.{secrets.token_hex(4)}")


def publish(tmp: Path, path: Path, *, exclusive: bool = False) -> None:
    """Move the complete file ``tmp`` to ``path`` and persist the rename.

    ``exclusive``: only if ``path`` does not exist yet (a hard link: of
    several processes creating one file, exactly one wins, the others get
    ``FileExistsError``); ``tmp`` stays for the caller to remove.
    """
    if exclusive:
        os.link(tmp, path)
    else:
        os.replace(tmp, path)
    # Without syncing the directory a crash could lose the rename (never
    # corrupt the file, which is what matters, so a failure here is tolerated).
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def atomic_writer(
    path: Path, *, mode: int = PRIVATE_MODE, exclusive: bool = False
) -> Iterator[BinaryIO]:
    """Write ``path`` through a temporary file: published when the block ends
    normally, removed when it raises (so a check inside the block, e.g. of a
    checksum, can refuse the file). ``path``'s directory must exist."""
    tmp = temp_path_for(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        publish(tmp, path, exclusive=exclusive)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomically(
    path: Path, data: bytes, *, mode: int = PRIVATE_MODE, exclusive: bool = False
) -> bool:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_writer`).

    Returns False only when ``exclusive`` and ``path`` already existed.
    """
    try:
        with atomic_writer(path, mode=mode, exclusive=exclusive) as handle:
            handle.write(data)
    except FileExistsError:
        if not exclusive:
            raise
        return False
    return True
