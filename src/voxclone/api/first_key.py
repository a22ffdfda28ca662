"""The first start of a fresh server creates one admin key (opt-in).

A container listens on 0.0.0.0 so that its published port works, and
``voxclone serve`` refuses that without an API key (every request would run
with full rights). With ``VOXCLONE_BOOTSTRAP_ADMIN_KEY=true`` a server whose
key store has never held a key creates one ``admin`` key, stores only its
hash (``KeyStore``) and prints the plaintext once, to stderr, so
``podman logs`` / ``docker logs`` shows it to the operator and nothing else
keeps it. A store that has keys, even if all are revoked, gets none: an
operator who revoked every key meant to lock the server, and a restart must
not quietly open it again.
"""

from __future__ import annotations

import fcntl
import sys
from typing import TextIO

from voxclone.config import Settings
from voxclone.key_setup import open_key_store
from voxclone.runtime.keys import SCOPE_ADMIN, KeyRecord
from voxclone.runtime.private_home import secure_home

BOOTSTRAP_KEY_NAME = "bootstrap-admin"


def create_first_admin_key(settings: Settings) -> tuple[str, KeyRecord] | None:
    """Create the admin key in the key store of ``settings`` if it has never held
    one; else None.

    A file lock makes two processes starting on the same home at once (two
    replicas on one volume) create at most one key between them.
    """
    home = settings.home
    secure_home(home)  # the key hash is created private, like every later file
    with open(home / ".bootstrap-key.lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        with open_key_store(settings) as store:
            if store.list(include_revoked=True):
                return None
            return store.create(BOOTSTRAP_KEY_NAME, {SCOPE_ADMIN})


def announce_key(plaintext: str, record: KeyRecord, out: TextIO | None = None) -> None:
    """Print the new key once, plainly, whatever the log format."""
    lines = [
        "=" * 72,
        f"voxclone: first start, created admin API key {record.id} ({record.name}).",
        "It is shown only now; only its hash is stored. Send it as",
        "'Authorization: Bearer <key>'. Create narrower keys and revoke this one",
        "with 'voxclone keys create|list|revoke' (in a container: exec into it).",
        f"    {plaintext}",
        "=" * 72,
    ]
    print("\n".join(lines), file=out or sys.stderr, flush=True)
