""" "Did you mean …?" for a voice name the CLI could not find.

A mistyped voice ("clear_femal", "Alise") was answered with "not found" and
nothing else. The names to suggest come from where the voice was looked up:
this home's library (built-in voices and the owner's cloned ones), or the
server the command spoke through (``GET /v1/audio/voices``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from voxclone.config import Settings
from voxclone.errors import VoxcloneError

MAX_SUGGESTIONS = 3


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """'; did you mean 'a' or 'b'?' for the candidates close to ``name`` (any
    case), else ''."""
    by_lower: dict[str, str] = {}
    for candidate in candidates:
        by_lower.setdefault(candidate.lower(), candidate)
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=MAX_SUGGESTIONS, cutoff=0.6)
    if not close:
        return ""
    quoted = [f"'{by_lower[c]}'" for c in close]
    return "; did you mean " + " or ".join(quoted) + "?"


def voice_missing(exc: VoxcloneError) -> bool:
    """The error says a voice named by the user does not exist."""
    status = getattr(exc, "status", None)
    return status == 404 and exc.field in ("voice", "voice_id")


def local_voice_names(settings: Settings, owner: str) -> list[str]:
    """Built-in voices, their other names and ``owner``'s stored voices here."""
    from voxclone.bootstrap import build_library

    library = build_library(settings)
    try:
        names: list[str] = []
        for item in library.catalog.listing(owner=owner):
            names.append(item.name)
            names.extend(item.aliases)
        return names
    finally:
        library.close()


def server_voice_names(url: str) -> list[str]:
    """The voices the server at ``url`` offers this caller, and their other names."""
    from voxclone.api.cli_remote import call_json

    answer: dict[str, Any] = call_json(url, "GET", "/v1/audio/voices")
    names: list[str] = []
    for voice in answer.get("voices", []):
        names.append(str(voice.get("name", "")))
        names.extend(str(alias) for alias in voice.get("aliases", []))
    names.extend(str(alias) for alias in answer.get("aliases", {}))
    return [name for name in names if name]


def with_suggestion(exc: VoxcloneError, name: str, candidates: Iterable[str]) -> VoxcloneError:
    """``exc`` with "did you mean" appended to its message (same status)."""
    hint = did_you_mean(name, candidates)
    if hint:
        exc.message = exc.message.rstrip(". ") + hint
        exc.args = (exc.message,)
    return exc
