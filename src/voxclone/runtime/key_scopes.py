"""The API key scopes, on their own: the CLI's parser names them without
importing the key store (SQLAlchemy and Alembic, ~0.3 s of every command)."""

from __future__ import annotations

SCOPE_TTS = "tts"
SCOPE_VOICES_READ = "voices:read"
SCOPE_VOICES_WRITE = "voices:write"
SCOPE_ADMIN = "admin"
SCOPES: frozenset[str] = frozenset({SCOPE_TTS, SCOPE_VOICES_READ, SCOPE_VOICES_WRITE, SCOPE_ADMIN})
