"""The API key scopes, and the owner a caller without a key acts as, on their
own: the CLI's parser names them without importing the key store (SQLAlchemy
and Alembic, ~0.3 s of every command)."""

from __future__ import annotations

SCOPE_TTS = "tts"
SCOPE_VOICES_READ = "voices:read"
SCOPE_VOICES_WRITE = "voices:write"
SCOPE_ADMIN = "admin"
# Not an access right but a waiver, granted only by naming it (``admin`` does
# not imply it, nor does the key-less local mode): this key's speech is served
# without the watermark when the operator allows per-key marking
# (Settings.watermark_per_key); otherwise it is ignored and the audio marked.
SCOPE_UNMARKED = "speech:unmarked"
ACCESS_SCOPES: frozenset[str] = frozenset(
    {SCOPE_TTS, SCOPE_VOICES_READ, SCOPE_VOICES_WRITE, SCOPE_ADMIN}
)
SCOPES: frozenset[str] = ACCESS_SCOPES | {SCOPE_UNMARKED}

# The owner of voices created without API keys: the CLI, the key-less loopback
# API and the Python library store and find them under it, so a clone made one
# way speaks the others; `voxclone keys create --adopt-local` hands it to a key.
LOCAL_OWNER = "local"
