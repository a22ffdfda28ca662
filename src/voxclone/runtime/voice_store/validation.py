"""Checks of what a caller hands the store: names, owners, languages, sources,
consent, quality reports and list pages. Each refusal is an ``InvalidInput``
naming the field and its limit."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import numpy as np

from voxclone.errors import InvalidInput
from voxclone.runtime.voice_store.records import (
    LIST_MAX_LIMIT,
    NAME_MAX_CHARS,
    OWNER_MAX_CHARS,
    VOICE_SOURCES,
    ConsentRecord,
)


def validate_voice_name(name: str) -> str:
    """Return the stripped name, or raise InvalidInput if it is not usable."""
    if not isinstance(name, str):
        raise InvalidInput("name must be text", field="name", limit=NAME_MAX_CHARS)
    cleaned = name.strip()
    if not cleaned or len(cleaned) > NAME_MAX_CHARS:
        raise InvalidInput(
            f"name must be 1 to {NAME_MAX_CHARS} characters after trimming spaces",
            field="name",
            limit=NAME_MAX_CHARS,
        )
    if not cleaned.isprintable():
        raise InvalidInput(
            "name must contain only printable characters (no control characters or line breaks)",
            field="name",
            limit=NAME_MAX_CHARS,
        )
    return cleaned


def name_key(name: str) -> str:
    # Names are unique per owner regardless of case: "Alice" and "alice" as two
    # different voices would only confuse whoever picks one by name.
    return name.casefold()


def validate_short_text(value: object, field_name: str, max_chars: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > max_chars:
        raise InvalidInput(
            f"{field_name} must be 1 to {max_chars} characters",
            field=field_name,
            limit=max_chars,
        )
    return value


def validate_source(source: str) -> str:
    if source not in VOICE_SOURCES:
        raise InvalidInput(
            f"source must be one of {', '.join(sorted(VOICE_SOURCES))}",
            field="source",
            value=str(source)[:32],
        )
    return source


def validate_consent(consent: ConsentRecord) -> ConsentRecord:
    digest = consent.statement_sha256
    if not (
        isinstance(digest, str)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest.lower())
    ):
        raise InvalidInput(
            "consent statement hash must be 64 hexadecimal characters (SHA-256)",
            field="consent",
        )
    validate_short_text(consent.given_by, "consent.given_by", OWNER_MAX_CHARS)
    try:
        datetime.fromisoformat(consent.given_at)
    except (TypeError, ValueError):
        raise InvalidInput(
            "consent time must be an ISO-8601 timestamp", field="consent.given_at"
        ) from None
    return ConsentRecord(digest.lower(), consent.given_by, consent.given_at, consent.client_address)


def _json_default(value: object) -> Any:
    # Quality reports are often built from numpy scalars; store them as plain JSON.
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def quality_to_json(quality: dict[str, Any]) -> str:
    if not isinstance(quality, dict):
        raise InvalidInput("quality report must be a JSON object", field="quality")
    try:
        return json.dumps(quality, default=_json_default, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError):
        raise InvalidInput(
            "quality report must contain only JSON values (no NaN or infinity)", field="quality"
        ) from None


def check_page(limit: int, offset: int) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= LIST_MAX_LIMIT:
        raise InvalidInput(
            f"limit must be between 1 and {LIST_MAX_LIMIT}", field="limit", limit=LIST_MAX_LIMIT
        )
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInput("offset must be 0 or more", field="offset")
