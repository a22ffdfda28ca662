"""The API key scopes, and the owner a caller without a key acts as, on their
own: the CLI's parser names them without importing the key store (SQLAlchemy
and Alembic, ~0.3 s of every command)."""

from __future__ import annotations

SCOPE_TTS = "tts"
SCOPE_VOICES_READ = "voices:read"
SCOPE_VOICES_WRITE = "voices:write"
SCOPE_ADMIN = "admin"
SCOPES: frozenset[str] = frozenset({SCOPE_TTS, SCOPE_VOICES_READ, SCOPE_VOICES_WRITE, SCOPE_ADMIN})

# The owner of voices created without API keys: the CLI, the key-less loopback
# API and the Python library store and find them under it, so a clone made one
# way speaks the others; `voxclone keys create --adopt-local` hands it to a key.
LOCAL_OWNER = "local"
