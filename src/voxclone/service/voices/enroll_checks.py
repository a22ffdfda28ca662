"""An enrollment's fields, checked before any audio work.

Cloning reads, denoises and measures the recordings (seconds of CPU); a field
the voice store would refuse afterwards (a bad or taken name, a language no
engine speaks, a ``given_by`` too long for the consent record) must be refused
before that, with the field named, not after the work is done and lost.
The store still checks everything again when the voice is written (a name can
be taken by a concurrent enrollment in between).
"""

from __future__ import annotations

from collections.abc import Sequence

from voxclone.errors import Conflict, InvalidInput, UnsupportedLanguage
from voxclone.runtime.voice_store import OWNER_MAX_CHARS, VoiceStore, validate_voice_name


def voice_language(language: str, served: Sequence[str]) -> str:
    """``language`` as a voice stores it: one of the engine's ``served`` codes
    (case and ``_`` forgiven; "en" is read as "en-us", as speech requests read
    it). UnsupportedLanguage names ``language`` and lists the codes otherwise."""
    allowed = sorted(served)
    code = language.strip().lower().replace("_", "-") if isinstance(language, str) else ""
    if code == "en" and "en-us" in allowed:
        code = "en-us"
    if code not in allowed:
        raise UnsupportedLanguage(
            f"language '{str(language)[:16]}' is not one this engine speaks; "
            f"use one of {', '.join(allowed)}",
            field="language",
            limit=allowed,
        )
    return code


def check_given_by(given_by: str) -> None:
    if not isinstance(given_by, str) or not given_by.strip() or len(given_by) > OWNER_MAX_CHARS:
        raise InvalidInput(
            f"given_by must be 1 to {OWNER_MAX_CHARS} characters",
            field="given_by",
            limit=OWNER_MAX_CHARS,
        )


def check_name_free(store: VoiceStore, name: str, owner: str) -> None:
    """The name is usable and the owner has no voice by that name (any case)."""
    cleaned = validate_voice_name(name)
    if store.find_by_name(cleaned, owner, include_reference_audio=False) is not None:
        raise Conflict(f"you already have a voice named {cleaned!r}", field="name")
