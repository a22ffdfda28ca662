"""The API-keys part of the composition root: settings → the key store.

The one place a :class:`~voxclone.runtime.keys.KeyStore` is opened from
``Settings`` (the app's authenticator, ``voxclone keys``, ``voxclone serve``'s
start-up checks and first admin key, ``voxclone wyoming --api-key``), so where
keys live is decided once: the shared ``VOXCLONE_DATABASE_URL`` when set (every
replica knows every key), else ``keys.sqlite3`` in the home. Kept apart from
``bootstrap.py`` because the CLI's key commands must not import every layer;
the store itself (SQLAlchemy) is imported on the first call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voxclone.config import Settings
    from voxclone.runtime.keys import KeyStore


def open_key_store(settings: Settings) -> KeyStore:
    """The key store of these settings, opened (and migrated); the caller closes
    it (``with open_key_store(settings) as keys: ...``)."""
    from voxclone.runtime.keys import KeyStore

    return KeyStore(settings.key_database_target)
