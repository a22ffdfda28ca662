"""``voxclone voices list``: the voices as a table, optionally of one language."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from voxclone.service.catalog import VoiceListing


def matches(item: VoiceListing, language: str | None) -> bool:
    """Whether ``item`` speaks ``language`` ("en": either English; a voice of
    no particular language, such as a blend, only without a filter)."""
    if not language:
        return True
    wanted = language.strip().lower()
    spoken = (item.language or "").lower()
    if wanted == "en":
        return spoken.startswith("en-")
    return spoken == wanted


def print_voices(listing: Sequence[VoiceListing], language: str | None) -> int:
    shown = [item for item in listing if matches(item, language)]
    for item in shown:
        kind = "built-in" if item.builtin else f"cloned v{item.version}"
        also = f" (also: {', '.join(item.aliases)})" if item.aliases else ""
        default = f" [default: {', '.join(item.default_for)}]" if item.default_for else ""
        print(
            f"{item.id:24s} {item.name:20s} {item.engine:10s} {kind:12s} "
            f"{item.language or '-':6s} {item.sex or '-':2s} {item.description}{default}{also}"
        )
    if language and not shown:
        print(f"voxclone: no voice speaks '{language[:16]}'", file=sys.stderr)
        return 1
    kokoro = [item for item in listing if item.builtin and item.engine == "kokoro"]
    if kokoro and not any(item.language for item in kokoro):
        # The earlier seven only: say how to get the standard voices.
        print(
            "voxclone: Kokoro's 54 standard voices (af_heart, ef_dora, ...) are not installed: "
            "python scripts/fetch_voice_packs.py",
            file=sys.stderr,
        )
    return 0
