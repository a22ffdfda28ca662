"""Inline phonemes, ``[word](/IPA/)``: the form, its words, and a check that
the IPA says something.

Kokoro-FastAPI clients write pronunciations inline; SSML ``<phoneme ph>``
becomes the same form (synth/text/ssml.py). The frontend speaks the IPA in
place of the word; word timestamps and captions report the word. IPA whose
every symbol is unknown to the engine used to be dropped symbol by symbol
until nothing was left: a 200 with a 0-second WAV. It is refused instead,
naming the symbols, before any synthesis.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from voxclone.errors import VoxcloneError

# [word](/IPA/): the word may be empty, the IPA may not; neither crosses a line.
INLINE_PHONEME = re.compile(r"\[([^\[\]\n]{0,100})\]\(/([^/()\n]{1,200})/\)")
# Stress and length marks have no sound of their own: IPA of only these says nothing.
_SILENT_MARKS = frozenset("ˈˌːˑ")


class UnspeakablePhonemes(VoxcloneError):
    """Inline IPA none of whose symbols the engine can speak (400).

    Not an InvalidInput on purpose: the SSML planner skips a segment whose
    InvalidInput names ``text`` (punctuation only: nothing to say), and this
    must reach the caller instead of silently dropping the sentence."""

    status = 400
    code = "invalid_phonemes"


def inline_words(text: str) -> str:
    """``text`` with every ``[word](/IPA/)`` as its word (what captions show)."""
    return INLINE_PHONEME.sub(r"\1", text) if "](/" in text else text


def check_speakable(
    word: str,
    ipa: str,
    phonemes: str,
    known: Callable[[str], bool],
) -> None:
    """Raise UnspeakablePhonemes when ``phonemes`` (the engine's rendering of
    ``ipa``) holds no sound; ``known(symbol)``: the engine has the symbol."""
    if any(ch.isalpha() and ch not in _SILENT_MARKS for ch in phonemes):
        return
    # Combining marks (tie bars, diacritics) are folded or dropped by design:
    # name the symbols themselves.
    unknown = [
        ch
        for ch in dict.fromkeys(ipa)
        if not ch.isspace() and unicodedata.category(ch) != "Mn" and not known(ch)
    ]
    shown = f"[{word[:40]}](/{ipa[:40]}/)"
    if unknown:
        detail = "unknown symbols: " + " ".join(unknown[:20])
    else:
        detail = "it holds only stress or length marks"
    raise UnspeakablePhonemes(
        f"{shown} has no sound this engine can speak ({detail}); write the IPA of the word",
        field="text",
        value=ipa[:200],
        limit={"unknown": unknown[:20]} if unknown else None,
    )


def unspeakable_detail(exc: UnspeakablePhonemes) -> str:
    """What made IPA unspeakable, as ``check_speakable`` names it: its unknown
    symbols, or that it holds only stress or length marks."""
    unknown = exc.limit.get("unknown") if isinstance(exc.limit, dict) else None
    if unknown:
        return "unknown symbols: " + " ".join(unknown)
    return "it holds only stress or length marks"
