"""Titles and forms of address read as words outside English.

espeak reads a title it does not know letter by letter or as a bare syllable:
French "M. Dupont" was "ˈɛm. dypˈɔ̃", Brazilian "Sr. Silva" the letters S-R,
Italian "sig." the syllable "sig" (and its period cut the sentence in two);
even the titles it does expand (Spanish "Sr.", "Dr.") keep their period,
which it speaks as a pause before the name. So each language gets its table
here, expanded to the spoken word before the numbers are spelled, and the
sentence splitter asks :func:`is_title_abbreviation` so that a title's period
never ends a sentence before a name.

A title is expanded where it is plainly one:

* with its period, before any word, punctuation or the end of the sentence
  ("after" = "any"; Spanish "¿Cómo está Ud.?"), before a word only ("word":
  French "M." is also the letter M at a sentence's end), or before a
  capitalised word only ("name": German "Fr." is also Friday);
* without its period (French writes "Mme", "Dr"; many write "Sr García")
  only before a capitalised word, and never for a single letter.

Tables are short on purpose: a form that is also a common word ("D." for
Spanish "don" is any initial D) is left to the G2P. English titles are in
normalize_en.py, which reads "Dr." as Doctor or Drive from its context.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Normalizer = Callable[[str], str]
After = Literal["any", "word", "name"]


@dataclass(frozen=True)
class Title:
    written: str  # without its final period: "Sr", "sig.ra", "M"
    word: str  # spoken before a name: "señor", "signor"
    alone: str | None = None  # spoken where no name follows, if different ("il dottore è")
    after: After = "any"  # what must follow the period for it to be this title
    lowercase: bool = True  # also a title written in lower case ("el sr. García")


def _table(*titles: Title) -> dict[str, Title]:
    return {t.written.lower(): t for t in titles}


TITLES: dict[str, dict[str, Title]] = {
    "es": _table(
        Title("Sr", "señor"),
        Title("Sra", "señora"),
        Title("Srta", "señorita"),
        Title("Sres", "señores"),
        Title("Sras", "señoras"),
        Title("Dr", "doctor"),
        Title("Dra", "doctora"),
        Title("Dres", "doctores"),
        Title("Prof", "profesor"),
        Title("Profa", "profesora"),
        Title("Lic", "licenciado"),
        Title("Lda", "licenciada"),
        Title("Ud", "usted"),
        Title("Uds", "ustedes"),
        Title("Vd", "usted"),
        Title("Vds", "ustedes"),
        Title("Dña", "doña"),
    ),
    "pt-br": _table(
        Title("Sr", "senhor"),
        Title("Sra", "senhora"),
        Title("Srta", "senhorita"),
        Title("Srs", "senhores"),
        Title("Sras", "senhoras"),
        Title("Dr", "doutor"),
        Title("Dra", "doutora"),
        Title("Drs", "doutores"),
        Title("Prof", "professor"),
        Title("Profa", "professora"),
        Title("Eng", "engenheiro"),
    ),
    # Before a name Italian drops the final -e: "il signor Rossi", "il signore è qui".
    "it": _table(
        Title("sig", "signor", "signore"),
        Title("sig.ra", "signora"),
        Title("sig.na", "signorina"),
        Title("sigg", "signori"),
        Title("dott", "dottor", "dottore"),
        Title("dott.ssa", "dottoressa"),
        Title("prof", "professor", "professore"),
        Title("prof.ssa", "professoressa"),
        Title("ing", "ingegner", "ingegnere"),
        Title("avv", "avvocato"),
    ),
    "fr": _table(
        Title("M", "Monsieur", after="word", lowercase=False),
        Title("MM", "Messieurs", after="word", lowercase=False),
        Title("Mme", "Madame", lowercase=False),
        Title("Mmes", "Mesdames", lowercase=False),
        Title("Mlle", "Mademoiselle", lowercase=False),
        Title("Mlles", "Mesdemoiselles", lowercase=False),
        Title("Dr", "docteur", lowercase=False),
        Title("Pr", "professeur", lowercase=False),
        Title("Me", "Maître", after="name", lowercase=False),  # else the pronoun "me"
    ),
    # German writes nouns capitalised, so a title is told by its capital, not by
    # the word after it; "Fr." before a date or a comma is Friday.
    "de": _table(
        Title("Hr", "Herr", lowercase=False),
        Title("Hrn", "Herrn", lowercase=False),
        Title("Fr", "Frau", after="name", lowercase=False),
        Title("Dr", "Doktor", lowercase=False),
        Title("Prof", "Professor", lowercase=False),
    ),
}

_NEXT = re.compile(r"\s*(\S?)")
_FIRST_WORD = re.compile(r"\w")


def _accepts_case(title: Title, written: str) -> bool:
    return title.lowercase or written[:1].isupper()


def _expansion(title: Title, written: str, dot: bool, following: str, *, opens: bool) -> str | None:
    """What ``written`` (+ its period when ``dot``) is read as, with ``following``
    the next non-space character ("" at the end) and ``opens`` whether it
    starts the sentence; None to leave it."""
    if not _accepts_case(title, written):
        return None
    name_follows = following.isalpha() and following.isupper()
    if not dot or title.after == "name":
        if not name_follows or (not dot and len(title.written) == 1):
            return None
    elif title.after == "word" and not following.isalpha():
        return None
    word = title.word if name_follows else (title.alone or title.word)
    # The abbreviation is capitalised mid-sentence ("la Sra. López"), the word
    # only where the table writes it so ("Monsieur", "Herr") or a sentence starts.
    if opens and written[:1].isupper():
        word = word[:1].upper() + word[1:]
    # A period with nothing after it also ended the sentence: keep it there.
    return word + ("." if dot and not following else "")


def _title_normalizer(table: dict[str, Title]) -> Normalizer:
    # Longest first, so "sig.ra" is tried before "sig".
    forms = "|".join(re.escape(w) for w in sorted(table, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.])({forms})(?:(\.)(?!\w)|(?![\w.]))", re.IGNORECASE)

    def normalize(text: str) -> str:
        first = _FIRST_WORD.search(text)
        opening = first.start() if first else 0  # where the sentence's first word starts

        def expand(match: re.Match[str]) -> str:
            written = match.group(1)
            following = _NEXT.match(text, match.end())
            next_char = following.group(1) if following else ""
            title = table[written.lower()]
            dot = bool(match.group(2))
            word = _expansion(title, written, dot, next_char, opens=match.start() == opening)
            return match.group() if word is None else word

        return pattern.sub(expand, text)

    return normalize


def title_normalizers() -> dict[str, Normalizer]:
    """Title expansion for each language with a table, keyed by language code."""
    return {code: _title_normalizer(table) for code, table in TITLES.items()}


def _by_form() -> dict[str, tuple[Title, ...]]:
    """Every table's titles by lower-case form (French and German "Dr" are two)."""
    found: dict[str, tuple[Title, ...]] = {}
    for table in TITLES.values():
        for form, title in table.items():
            found[form] = (*found.get(form, ()), title)
    return found


_ALL_TITLES = _by_form()


def is_title_abbreviation(token: str) -> bool:
    """True if ``token`` (the text before a period, e.g. "Sra", "sig.ra") is a
    title in one of the tables, written in a case that language uses for it.
    The splitter knows no language, so any table's title counts."""
    return any(_accepts_case(t, token) for t in _ALL_TITLES.get(token.lower(), ()))
