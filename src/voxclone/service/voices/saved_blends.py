"""Saving a voice blend as a library voice (``POST /v1/voices/blend``,
``voxclone voices blend NAME EXPR``).

The saved voice is a snapshot of what the expression resolves to now: the
mixed style pack and tone curve ``service/blends.py`` computes. Being a stored
voice (an id and a version), it is cached like any other, which an unsaved
expression never is.

Privacy (docs/design.md §1.5): a blend of cloned voices holds data derived from
their recordings. Its parts are recorded in its quality report
(``quality["blend"]["parts"]``) and the voice store deletes (and purges) a
saved blend together with any of its parts (``delete_with_derived``). Parts are
the owner's own voices or built-ins: the catalog resolves names for the owner
only, so another owner's voice is "not found" as everywhere else.
"""

from __future__ import annotations

import hashlib

import numpy as np

from voxclone.errors import InvalidInput, VoxcloneError
from voxclone.runtime.voice_store import (
    BLEND_SOURCE,
    DEFAULT_EMBEDDING_SHAPE,
    ConsentRecord,
    VoiceRecord,
    VoiceStore,
    utc_now_iso,
)
from voxclone.service.blends import parse_blend
from voxclone.service.catalog import ResolvedVoice, VoiceCatalog

FIELD = "blend"


def _as_field(exc: VoxcloneError) -> VoxcloneError:
    """The same error, naming the request's ``blend`` field instead of ``voice``."""
    if exc.field != "voice":
        return exc
    return type(exc)(exc.message, field=FIELD, limit=exc.limit, value=exc.value)


def save_blend(
    catalog: VoiceCatalog,
    store: VoiceStore,
    *,
    name: str,
    expression: str,
    owner: str,
    language: str | None = None,
) -> VoiceRecord:
    """Store ``expression`` (e.g. ``"alice(2)+clear_male(1)"``) as ``owner``'s voice ``name``."""
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidInput("blend must be an expression such as 'a(2)+b(1)'", field=FIELD)
    try:
        terms = parse_blend(expression)
        if terms is None:
            raise InvalidInput(
                "a blend mixes at least two voices, such as 'alice(2)+clear_male(1)'",
                field=FIELD,
            )
        mixed = catalog.resolve(expression, owner)
        parts = [catalog.resolve(term.name, owner) for term in terms]
    except VoxcloneError as exc:
        raise _as_field(exc) from None
    assert mixed.style is not None  # blend_style refuses prompt voices
    total = sum(term.weight for term in terms)
    quality = {
        "clone_method": "blend",
        "similarity": None,
        "wer": None,
        "blend": {
            "expression": expression.strip(),
            "parts": [
                _part(part, term.weight / total) for part, term in zip(parts, terms, strict=True)
            ],
        },
    }
    statement = f"saved blend {expression.strip()} of " + ", ".join(
        f"{p.id}@{p.version}" for p in parts
    )
    return store.create(
        VoiceRecord(
            id="",
            name=name,
            language=language or mixed.language or parts[0].language or "en-us",
            owner=owner,
            created_at="",
            updated_at="",
            version=1,
            # No new speaker agreed to anything: the record says which parts
            # (each with its own consent record) the voice was derived from.
            consent=ConsentRecord(
                statement_sha256=hashlib.sha256(statement.encode("utf-8")).hexdigest(),
                given_by=owner,
                given_at=utc_now_iso(),
            ),
            # No recording, so no speaker print: refinement and added
            # recordings are refused for blends (service/voices/service.py).
            embedding=np.zeros(DEFAULT_EMBEDDING_SHAPE, np.float32),
            style=mixed.style,
            quality=quality,
            source=BLEND_SOURCE,
            tone_db=None if mixed.tone is None else mixed.tone.gain_db,
            engine=mixed.engine,
            model_id=mixed.model_id,
        )
    )


def _part(voice: ResolvedVoice, weight: float) -> dict[str, object]:
    return {
        "voice": voice.id,
        "name": voice.name,
        "version": voice.version,
        "builtin": voice.builtin,
        "weight": round(weight, 6),
    }
