"""A pronunciation lexicon applied to text (pure: entries in, marked text out).

An entry says how one word (or a fixed phrase) is spoken in one language:
either IPA (spoken as given, like an inline ``[word](/IPA/)``) or a
respelling (ordinary text the G2P reads instead, "Nguyen" → "win"). Matching
is whole-word and case-insensitive; the longest entry wins where two overlap.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from voxclone.errors import InvalidInput, UnsupportedLanguage

MAX_WORD_CHARS = 100
MAX_VALUE_CHARS = 200
# The inline form's delimiters cannot appear inside IPA.
# Zero-width (non-)joiners belong inside words of Indic and Persian scripts.
_JOINERS = "\u200c\u200d"
_IPA_FORBIDDEN = re.compile(r"[\[\]()/\n\r]")


@dataclass(frozen=True)
class Pronunciation:
    word: str
    language: str
    ipa: str | None = None
    respelling: str | None = None


def word_key(word: str) -> str:
    """How a word is stored and matched: case-folded, inner whitespace single."""
    return " ".join(word.split()).casefold()


def entry_language(language: str, served: Iterable[str]) -> str:
    """``language`` as an entry stores it: one of ``served`` or a base language
    that covers some ("en" for en-us and en-gb); UnsupportedLanguage otherwise."""
    served = tuple(served)
    allowed = sorted({*served, *(lang.split("-")[0] for lang in served)})
    code = language.strip().lower().replace("_", "-")
    if code not in allowed:
        raise UnsupportedLanguage(
            f"language '{language[:16]}' is not supported", field="language", limit=allowed
        )
    return code


def check_pronunciation(word: str, ipa: str | None, respelling: str | None) -> None:
    """InvalidInput naming the field when an entry cannot be used."""
    if not isinstance(word, str) or not word.strip() or not any(c.isalnum() for c in word):
        raise InvalidInput("word must contain a letter or digit", field="word")
    if len(word) > MAX_WORD_CHARS:
        raise InvalidInput(
            f"word is longer than {MAX_WORD_CHARS} characters",
            field="word",
            limit=MAX_WORD_CHARS,
        )
    if (ipa is None) == (respelling is None):
        raise InvalidInput("give exactly one of ipa or respelling", field="ipa")
    name, value = ("ipa", ipa) if ipa is not None else ("respelling", respelling)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must not be empty", field=name)
    if len(value) > MAX_VALUE_CHARS:
        raise InvalidInput(
            f"{name} is longer than {MAX_VALUE_CHARS} characters",
            field=name,
            limit=MAX_VALUE_CHARS,
        )
    for field, text in (("word", word), (name, value)):
        # Entries are applied after the text is cleaned: nothing invisible,
        # no control or private-use characters (the frontend's stand-ins).
        if any(
            unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs", "Cn") and ch not in _JOINERS
            for ch in text
        ):
            raise InvalidInput(f"{field} contains a control or unassigned character", field=field)
    if name == "ipa" and _IPA_FORBIDDEN.search(value):
        raise InvalidInput("ipa must not contain / [ ] ( ) or line breaks", field="ipa")


class Lexicon:
    """Entries of one owner for one language, compiled into one matcher."""

    def __init__(self, entries: Iterable[Pronunciation]) -> None:
        self._by_key: dict[str, Pronunciation] = {}
        for entry in entries:
            self._by_key[word_key(entry.word)] = entry
        words = sorted(self._by_key, key=len, reverse=True)
        self._pattern = (
            re.compile(
                r"(?<!\w)("
                + "|".join(r"\s+".join(map(re.escape, w.split())) for w in words)
                + r")(?!\w)",
                re.IGNORECASE,
            )
            if words
            else None
        )

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def fingerprint(self) -> str:
        """Changes whenever an entry does (part of the audio cache key)."""
        digest = hashlib.sha256()
        for key in sorted(self._by_key):
            e = self._by_key[key]
            digest.update(f"{key}\0{e.language}\0{e.ipa}\0{e.respelling}\n".encode())
        return digest.hexdigest()[:16]

    def apply(self, text: str, mark: Callable[[str, str], str]) -> str:
        """``text`` with each entry's word replaced: IPA via ``mark(word, ipa)``
        (the frontend's inline-phoneme stand-in), a respelling as its text."""
        if self._pattern is None:
            return text

        def replace(match: re.Match[str]) -> str:
            entry = self._by_key.get(word_key(match.group(1)))
            if entry is None:
                return match.group(0)
            if entry.ipa is not None:
                return mark(match.group(1), entry.ipa)
            return f" {entry.respelling} "

        return self._pattern.sub(replace, text)


def for_language(entries: Iterable[Pronunciation], language: str) -> Lexicon:
    """The entries that apply to ``language``: its own, and its base language's
    ("en" entries apply to en-us and en-gb); the exact language wins."""
    entries = list(entries)
    base = language.split("-")[0]
    general = [e for e in entries if e.language == base and base != language]
    exact = [e for e in entries if e.language == language]
    return Lexicon([*general, *exact])
