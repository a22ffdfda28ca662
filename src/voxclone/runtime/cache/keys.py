"""Cache keys: one SHA-256 over everything that changes the audio, and the
per-voice tag every tier indexes entries by.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

# Bumped whenever the key derivation changes, so old entries simply stop matching.
_KEY_SCHEMA = "voxclone-audio-v1"


def _canonical(value: Any) -> Any:
    """Normalize a key part so equal requests always serialize identically."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError("cache key parts must be finite numbers")
        # speed=1 and speed=1.0 (or 1.0000000001 after float arithmetic) are one request.
        return round(number, 6)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_canonical(v) for v in value)
    raise TypeError(f"cache key parts must be JSON-like values, not {type(value).__name__}")


def cache_key(**parts: Any) -> str:
    """SHA-256 hex digest of a canonical JSON rendering of ``parts``.

    Pass everything that changes the output audio: model id and version, voice id
    and version, normalized text, language, every control, format, sample rate.
    """
    if not parts:
        raise ValueError("cache_key needs at least one part")
    document = {"schema": _KEY_SCHEMA, "parts": _canonical(parts)}
    blob = json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def voice_tag(voice_id: str) -> str:
    """Stable, file-name and Redis-key safe tag for indexing entries by voice."""
    return hashlib.sha256(("voice:" + voice_id).encode("utf-8")).hexdigest()[:40]
