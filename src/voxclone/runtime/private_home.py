"""The data directory holds biometric data: only its owner may read it.

``VOXCLONE_HOME`` keeps voice embeddings and styles, consent records, API key
hashes and cached speech in cloned voices. Every entry point makes it 0700
(also an existing one made with looser modes by an older version), its
databases 0600, and sets the process umask to 077 so everything created later
(SQLite's -wal/-shm files, cache entries, assembled models) is private too.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600
# Files directly in the home that hold user data (databases and their journals).
_DATA_SUFFIXES = (".sqlite3", ".sqlite3-wal", ".sqlite3-shm", ".sqlite3-journal")


def secure_home(home: Path) -> Path:
    """Create ``home`` private (or make it so) and set the process umask; return it."""
    os.umask(PRIVATE_UMASK)
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    _restrict(home, DIR_MODE)
    for entry in home.iterdir():
        with contextlib.suppress(OSError):
            if entry.is_symlink():
                continue
            if entry.is_dir():
                _restrict(entry, DIR_MODE)
            elif entry.name.endswith(_DATA_SUFFIXES):
                _restrict(entry, FILE_MODE)
    return home


def _restrict(path: Path, mode: int) -> None:
    """Drop group and other permissions beyond ``mode`` (never adds any)."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current & ~mode:
        os.chmod(path, current & mode)
