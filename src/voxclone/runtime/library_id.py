"""Which voice library a process serves: a stable id the server reports and
the CLI compares with its own.

Issue 46: a CLI given ``VOXCLONE_HOME=/x`` enrolled a voice through the local
server, which held another library, and the next ``say`` in ``/x`` answered
"voice not found". The server now names its library (``GET /readyz`` and
``GET /v1/info``, header :data:`LIBRARY_HEADER`), and the CLI uses a server it
found on its own only when the ids match (api/cli_remote.py).

The library is where voices are stored: the SQLite files in the home, or the
shared database when ``database_url`` is set. The id of a home is a random
token written once into ``<home>/library-id`` (0600, like the databases); the
id of a database is derived from its URL without the password, so every
process given the same database reports the same library whatever its home.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

LIBRARY_HEADER = "X-Voxclone-Library"
ID_FILE = "library-id"
_FILE_MODE = 0o600


def library_id(home: Path, database_url: str | None = None) -> str:
    """The library's id, created in ``home`` on first use (servers call this)."""
    if database_url:
        return _database_id(database_url)
    found = read_library_id(home)
    if found is not None:
        return found
    path = Path(home) / ID_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    token = "home-" + secrets.token_hex(12)
    try:
        # O_EXCL: two processes starting on one new home agree on one id.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
    except FileExistsError:
        return read_library_id(home) or token
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return token


def read_library_id(home: Path, database_url: str | None = None) -> str | None:
    """The id without creating anything; None for a home no server has used yet."""
    if database_url:
        return _database_id(database_url)
    with contextlib.suppress(OSError, UnicodeDecodeError):
        token = (Path(home) / ID_FILE).read_text().strip()
        if token:
            return token
    return None


def _database_id(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    if parts.username:
        host = f"{parts.username}@{host}"
    # No password in what is hashed: the id is shown to clients.
    clean = urlunsplit((parts.scheme, host, parts.path, "", ""))
    return "db-" + hashlib.sha256(clean.encode()).hexdigest()[:24]
