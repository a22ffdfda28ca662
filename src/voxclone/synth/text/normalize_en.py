"""English text normalization: written forms → words a G2P can pronounce.

``normalize_english`` rewrites numbers, dates, times, money, units, addresses and
abbreviations into plain words ("$5.99" → "five dollars and ninety-nine cents").
It expects text that already went through ``segment.clean_text`` (NFKC, no
control characters) but stays safe on anything: it never raises and runs in time
linear in the input length.

Design notes
------------
* The work is a fixed sequence of regex passes. Order matters: specific forms
  (URLs, dates, phone numbers, money) are rewritten before the generic number
  pass would tear them apart, and everything left over is read as a cardinal.
* Every pattern that can start on a digit is guarded by a look-behind so that it
  only starts at the beginning of a digit run, and numbers are matched inside
  atomic groups. Together this keeps the regex engine from backtracking
  quadratically on hostile inputs such as 100 000 digits in a row.
* Numeric patterns are compiled with ``re.ASCII``: ``\\d`` must mean 0-9 (Python
  would otherwise match Arabic-Indic or Devanagari digits, whose English reading
  would be wrong), and CJK text next to a number counts as a word boundary.
* American English conventions: no "and" inside numbers ("one hundred five"),
  "meter"/"liter" spellings.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

__all__ = [
    "digits_to_words",
    "normalize_english",
    "number_to_words",
    "ordinal_to_words",
    "year_to_words",
]

_log = logging.getLogger(__name__)

# =============================================================================
# Number words
# =============================================================================

_ONES = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
    "seventeen", "eighteen", "nineteen",
)  # fmt: skip
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ("", "thousand", "million", "billion", "trillion", "quadrillion", "quintillion")
# Beyond quintillions nobody says the number; reading the digits is clearer.
_MAX_CARDINAL_DIGITS = 3 * len(_SCALES)
_ORDINAL_IRREGULAR = {
    "one": "first", "two": "second", "three": "third", "five": "fifth",
    "eight": "eighth", "nine": "ninth", "twelve": "twelfth",
}  # fmt: skip


def _under_thousand(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    parts: list[str] = []
    if hundreds:
        parts.append(f"{_ONES[hundreds]} hundred")
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        parts.append(_TENS[tens] + (f"-{_ONES[ones]}" if ones else ""))
    elif rest:
        parts.append(_ONES[rest])
    return " ".join(parts)


def digits_to_words(digits: str) -> str:
    """Read each ASCII digit on its own: "0451" → "zero four five one"."""
    return " ".join(_ONES[ord(ch) - 48] for ch in digits if "0" <= ch <= "9")


def number_to_words(n: int) -> str:
    """Cardinal number in words: 1234 → "one thousand two hundred thirty-four"."""
    if n < 0:
        return "minus " + number_to_words(-n)
    if n == 0:
        return "zero"
    if n >= 10**_MAX_CARDINAL_DIGITS:
        return digits_to_words(str(n))
    groups: list[str] = []
    scale = 0
    while n:
        n, chunk = divmod(n, 1000)
        if chunk:
            groups.append(f"{_under_thousand(chunk)} {_SCALES[scale]}".rstrip())
        scale += 1
    return " ".join(reversed(groups))


def _ordinal_of_words(words: str) -> str:
    """Turn the last word of a cardinal phrase into its ordinal form."""
    cut = max(words.rfind(" "), words.rfind("-")) + 1
    head, last = words[:cut], words[cut:]
    if last in _ORDINAL_IRREGULAR:
        last = _ORDINAL_IRREGULAR[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + last


def ordinal_to_words(n: int) -> str:
    """Ordinal number in words: 22 → "twenty-second", 103 → "one hundred third"."""
    return _ordinal_of_words(number_to_words(n))


def year_to_words(year: int) -> str:
    """Year as spoken: 1999 → "nineteen ninety-nine", 2005 → "two thousand five"."""
    if not 1000 <= year <= 9999 or 2000 <= year <= 2009 or year % 1000 == 0:
        return number_to_words(year)
    century, rest = divmod(year, 100)
    if rest == 0:
        return f"{number_to_words(century)} hundred"
    if rest < 10:
        return f"{number_to_words(century)} oh {_ONES[rest]}"
    return f"{number_to_words(century)} {number_to_words(rest)}"


def _plural_of_words(words: str) -> str:
    """Pluralise the last word of a number phrase: "nineteen ninety" → "nineteen nineties"."""
    if words.endswith("y"):
        return words[:-1] + "ies"
    return words + "s"


# Short number strings repeat a lot (and hostile inputs repeat them 50 000 times).
_CACHED_NUMBER_LENGTH = 24


def _number_text_to_words(text: str) -> str:
    """Read a written number ("-1,234.5", ".25", "007") as words."""
    if len(text) <= _CACHED_NUMBER_LENGTH:
        return _cached_number_text_to_words(text)
    return _read_number_text(text)


@lru_cache(maxsize=4096)
def _cached_number_text_to_words(text: str) -> str:
    return _read_number_text(text)


def _read_number_text(text: str) -> str:
    negative = text[:1] in ("-", "−")
    body = text.lstrip("-−").replace(",", "")
    whole, _, fraction = body.partition(".")
    if not whole:
        words = ""
    elif len(whole) > 1 and whole.startswith("0"):
        words = digits_to_words(whole)  # "007", "0800": codes, not quantities
    elif len(whole) > _MAX_CARDINAL_DIGITS:
        words = digits_to_words(whole)
    else:
        words = number_to_words(int(whole))
    if fraction:
        words = f"{words} point {digits_to_words(fraction)}".strip()
    return f"minus {words}" if negative else words


def _is_one(number_text: str) -> bool:
    """True when a quantity takes the singular ("1 km" → "one kilometer")."""
    return number_text.lstrip("-−") == "1"


# =============================================================================
# Shared patterns and helpers
# =============================================================================

# A written number without sign; atomic so a failed match never backtracks into it.
_NUM = r"(?>\d+(?:,\d{3}(?!\d))*(?:\.\d+)?)"
# Where a number may start: not glued to a letter, digit or decimal point before it.
_NUM_START = r"(?<![A-Za-z0-9.,])"
_SIGN = r"[-−]?"

_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December",
)  # fmt: skip
MONTHS = _MONTHS
_MONTH_ALT = "|".join(_MONTHS)

# Capitalised words that almost always open a sentence: after an ambiguous
# abbreviation ("U.S.", "Main St.") they tell us its period also ended the sentence.
_SENTENCE_STARTERS = frozenset(
    {
        "A", "An", "And", "As", "At", "After", "Before", "But", "He", "Her", "His", "How",
        "I", "If", "In", "It", "Its", "My", "Of", "On", "Our", "She", "So", "That", "The",
        "Their", "Then", "There", "These", "They", "This", "Those", "Today", "Tomorrow",
        "We", "What", "When", "Where", "Why", "You", "Yesterday",
    }
)  # fmt: skip
_END_OF_TEXT = re.compile(r"\s*\Z|[ \t]*\n")
_NEXT_WORD = re.compile(r"\s+[\"'(]?([A-Za-z]+)")

Replacement = Callable[[re.Match[str]], str]


def _compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags | re.ASCII)


def _period_if_sentence_end(match: re.Match[str], *, strict: bool = True) -> str:
    """Give back the period an expanded abbreviation swallowed when it also ended the sentence.

    ``strict``: only a typical sentence opener after it counts ("U.S. Army" keeps
    going, "U.S. The" does not); otherwise any capitalised word does ("etc. Then").
    """
    text, end = match.string, match.end()
    if _END_OF_TEXT.match(text, end):
        return "."
    following = _NEXT_WORD.match(text, end)
    if following is None or not following.group(1)[0].isupper():
        return ""
    return "." if not strict or following.group(1) in _SENTENCE_STARTERS else ""


def _spaced(word: str) -> str:
    return f" {word} "


# =============================================================================
# Pass 0: characters the later passes rely on
# =============================================================================

_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")
_LINE_BREAKS = re.compile(r"\s*\n\s*")
_CHAR_MAP = str.maketrans(
    {
        "\u2019": "'", "\u2018": "'", "\u2032": "'", "\u2212": "-", "\u2044": "/",
        "\u00a0": " ", "\u202f": " ", "\u2009": " ", "\u2028": "\n", "\u2029": "\n\n",
        "\u00bd": " 1/2", "\u00bc": " 1/4", "\u00be": " 3/4", "\u2153": " 1/3",
        "\u2154": " 2/3", "\u215b": " 1/8",
    }
)  # fmt: skip


def _paragraph_or_line_break(match: re.Match[str]) -> str:
    return "\n\n" if match.group().count("\n") > 1 else "\n"


def _clean_characters(text: str) -> str:
    """Drop control characters and collapse whitespace.

    Collapsing first matters for speed as well as looks: later patterns such as
    ``\\s*&`` would otherwise rescan long whitespace runs from every position.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL_CHARS.sub(" ", text).translate(_CHAR_MAP)
    text = _HORIZONTAL_SPACE.sub(" ", text)
    return _LINE_BREAKS.sub(_paragraph_or_line_break, text)


# =============================================================================
# Pass 1: e-mails, URLs, hashtags, handles
# =============================================================================

_ADDRESS_SYMBOLS = {
    ".": "dot", "/": "slash", ":": "colon", "-": "dash", "_": "underscore",
    "?": "question mark", "=": "equals", "&": "and", "#": "hash", "%": "percent",
    "~": "tilde", "+": "plus", "@": "at",
}  # fmt: skip
_EMAIL = _compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]++@[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)++")
_URL = _compile(r"(?i)\b(?:https?://|www\.)[^\s<>\"]++")
_BARE_DOMAIN = _compile(
    r"(?i)(?<![\w.@/-])(?>(?:[a-z0-9-]+\.)+)"
    r"(?:com|org|net|edu|gov|io|ai|dev|co|uk|de|fr|info|app|me|tv|us)\b(?:/[^\s<>\"]*+)?"
)
_URL_TRAILING = ".,;:!?)]}'\""
_HASHTAG = _compile(r"(?<![\w#&])#([A-Za-z][A-Za-z0-9_]*+)")
_NUMBER_SIGN = _compile(r"(?<![\w#&])#(?=\d)")
_HANDLE = _compile(r"(?<![\w.@])@([A-Za-z0-9_]++)")
_CAMEL_BOUNDARY = _compile(r"(?<=[a-z])(?=[A-Z])|_+")


def _spell_address(address: str) -> str:
    words = (_spaced(_ADDRESS_SYMBOLS[ch]) if ch in _ADDRESS_SYMBOLS else ch for ch in address)
    return " ".join("".join(words).split())


def _email(match: re.Match[str]) -> str:
    return _spell_address(match.group())


def _url(match: re.Match[str]) -> str:
    address = match.group()
    stripped = address.rstrip(_URL_TRAILING)
    trailing = address[len(stripped) :]
    lowered = stripped.lower()
    for prefix in ("https://", "http://"):
        if lowered.startswith(prefix):
            stripped, lowered = stripped[len(prefix) :], lowered[len(prefix) :]
    if lowered.startswith("www."):
        stripped = stripped[4:]
    return _spell_address(stripped.rstrip("/")) + trailing


def _hashtag(match: re.Match[str]) -> str:
    return "hashtag " + _CAMEL_BOUNDARY.sub(" ", match.group(1)).strip()


def _handle(match: re.Match[str]) -> str:
    return "at " + _CAMEL_BOUNDARY.sub(" ", match.group(1)).strip()


# =============================================================================
# Pass 2: abbreviations
# =============================================================================

# Titles read one way before a capitalised name and another way after one.
_TITLES = {
    "Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Prof": "Professor", "Rev": "Reverend",
    "Capt": "Captain", "Lt": "Lieutenant", "Sgt": "Sergeant", "Mt": "Mount",
}  # fmt: skip
_TITLE = _compile(r"\b(Mr|Mrs|Ms|Prof|Rev|Capt|Lt|Sgt|Mt)(?:\.|(?=\s+[A-Z]))")
# "Dr. Smith" / "Elm Dr.", "St. Louis" / "Main St."
_DR_ST = _compile(r"\b(Dr|St)(\.|(?=\s+[A-Z]))")
# Abbreviations whose period may also end the sentence.
_SENTENCE_ABBREVIATIONS = {
    "etc": "et cetera", "jr": "Junior", "sr": "Senior", "inc": "Incorporated",
    "ltd": "Limited", "corp": "Corporation", "ave": "Avenue", "blvd": "Boulevard",
    "dept": "Department", "approx": "approximately", "et al": "et al",
}  # fmt: skip
_SENTENCE_ABBREVIATION = _compile(
    r"(?i)(?<![A-Za-z.])(etc|jr|sr|inc|ltd|corp|ave|blvd|dept|approx|et al)\."
)
_INLINE_ABBREVIATIONS = {"e.g.": "for example", "i.e.": "that is", "cf.": "compare"}
_INLINE_ABBREVIATION = _compile(r"(?i)(?<![A-Za-z.])(e\.g\.|i\.e\.|cf\.)")
_VERSUS = _compile(r"(?i)(?<![A-Za-z.])vs\b\.?")
_NUMBER_ABBREVIATION = _compile(r"(?i)\bno\.\s?(?=\d)")
_FIGURE = _compile(r"\b(Fig|Vol|Ch)\.\s?(?=\d)")
_FIGURE_WORDS = {"Fig": "figure", "Vol": "volume", "Ch": "chapter"}
_MONTH_ABBREVIATIONS = {
    "Jan": "January", "Feb": "February", "Mar": "March", "Apr": "April", "Jun": "June",
    "Jul": "July", "Aug": "August", "Sep": "September", "Sept": "September",
    "Oct": "October", "Nov": "November", "Dec": "December",
}  # fmt: skip
_MONTH_ABBREVIATION = _compile(
    r"\b(Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)(?:\.|(?=\s+\d))"
)


def _title(match: re.Match[str]) -> str:
    return _TITLES[match.group(1)]


def _dr_st(match: re.Match[str]) -> str:
    following = _NEXT_WORD.match(match.string, match.end())
    next_word = following.group(1) if following else ""
    # "Dr. Smith", "St. Louis": a name follows. "Elm St. The ...": a new sentence does.
    before_name = next_word[:1].isupper() and next_word not in _SENTENCE_STARTERS
    if match.group(1) == "Dr":
        word = "Doctor" if before_name else "Drive"
    else:
        word = "Saint" if before_name else "Street"
    if before_name or not match.group(2):
        return word
    return word + _period_if_sentence_end(match)


def _sentence_abbreviation(match: re.Match[str]) -> str:
    word = _SENTENCE_ABBREVIATIONS[match.group(1).lower()]
    # After "etc." a capital nearly always starts a new sentence; after "Inc." it may be a name.
    return word + _period_if_sentence_end(match, strict=word != "et cetera")


def _inline_abbreviation(match: re.Match[str]) -> str:
    return _INLINE_ABBREVIATIONS[match.group(1).lower()]


def _month_abbreviation(match: re.Match[str]) -> str:
    word = _MONTH_ABBREVIATIONS[match.group(1)]
    if match.group().endswith("."):
        return word + _period_if_sentence_end(match)
    return word


# =============================================================================
# Pass 3: dates and times
# =============================================================================

_ISO_DATE = _compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])(T(?=\d))?")
_SLASH_DATE = _compile(r"(?<![\d/])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])")
_MONTH_DAY = _compile(
    rf"\b({_MONTH_ALT})\s+(\d{{1,2}})(?:st|nd|rd|th)?(?![\d:]|[.,]\d)(?:,?\s+(\d{{4}})(?!\d))?"
)
_DAY_MONTH = _compile(
    rf"(?<![\w.,])(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_ALT})\b(?:,?\s+(\d{{4}})(?!\d))?"
)
_AM_PM = r"(?i:([ap])\.?m\b\.?)"
_CLOCK = _compile(rf"(?<![\d:.])([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?(?![\d:])(?:\s?{_AM_PM})?")
_HOUR_AM_PM = _compile(rf"(?<![\w.:,])(1[0-2]|0?[1-9])\s?{_AM_PM}")


def _year_or_number(text: str) -> str:
    value = int(text)
    return year_to_words(value) if 1100 <= value <= 2099 else number_to_words(value)


def _date_words(month: int, day: int, year: str | None, day_first: bool) -> str:
    name = _MONTHS[month - 1]
    if day_first:
        spoken = f"the {ordinal_to_words(day)} of {name}"
    else:
        spoken = f"{name} {ordinal_to_words(day)}"
    if year:
        spoken += ", " + (_year_or_number(year) if len(year) == 4 else number_to_words(int(year)))
    return spoken


def date_to_words(month: int, day: int, year: str | None, *, day_first: bool = False) -> str:
    """A date as spoken: (3, 5, "2024") → "March fifth, twenty twenty-four"."""
    return _date_words(month, day, year, day_first)


def _iso_date(match: re.Match[str]) -> str:
    year, month, day = (int(g) for g in match.group(1, 2, 3))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match.group()
    at = " at " if match.group(4) else ""
    return _date_words(month, day, match.group(1), day_first=False) + at


def _slash_date(match: re.Match[str]) -> str:
    first, second = int(match.group(1)), int(match.group(2))
    # US order (month/day) unless the first field cannot be a month.
    if 1 <= first <= 12 and 1 <= second <= 31:
        return _date_words(first, second, match.group(3), day_first=False)
    if 1 <= second <= 12 and 1 <= first <= 31:
        return _date_words(second, first, match.group(3), day_first=True)
    return match.group()


def _month_day(match: re.Match[str]) -> str:
    day = int(match.group(2))
    if not 1 <= day <= 31:
        return match.group()
    return _date_words(_MONTHS.index(match.group(1)) + 1, day, match.group(3), day_first=False)


def _day_month(match: re.Match[str]) -> str:
    day = int(match.group(1))
    if not 1 <= day <= 31:
        return match.group()
    return _date_words(_MONTHS.index(match.group(2)) + 1, day, match.group(3), day_first=True)


def _am_pm_words(match: re.Match[str], letter: str) -> str:
    words = " a m" if letter.lower() == "a" else " p m"
    if match.group().endswith("."):
        words += _period_if_sentence_end(match)
    return words


def _clock(match: re.Match[str]) -> str:
    hour, minute = int(match.group(1)), int(match.group(2))
    seconds, letter = match.group(3), match.group(4)
    hour_words = number_to_words(hour)
    if minute == 0:
        if letter:
            spoken = hour_words
        elif 1 <= hour <= 12:
            spoken = f"{hour_words} o'clock"
        else:
            spoken = f"{hour_words} hundred"
    elif minute < 10:
        spoken = f"{hour_words} oh {_ONES[minute]}"
    else:
        spoken = f"{hour_words} {number_to_words(minute)}"
    if seconds and int(seconds):
        unit = "second" if int(seconds) == 1 else "seconds"
        spoken += f" and {number_to_words(int(seconds))} {unit}"
    if letter:
        spoken += _am_pm_words(match, letter)
    return spoken


def _hour_am_pm(match: re.Match[str]) -> str:
    return number_to_words(int(match.group(1))) + _am_pm_words(match, match.group(2))


# =============================================================================
# Pass 4: digit strings that are not quantities
# =============================================================================

# North-American numbers: 555-123-4567, (555) 123-4567, +1 555 123 4567, 1-800-555-1234.
_PHONE_NANP = _compile(
    r"(?<![\w+])(?:\+?1[ .-]?)?(?:\(\d{3}\)\s?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w-])"
)
_PHONE_INTERNATIONAL = _compile(r"(?<![\w+])\+\d{1,3}(?>[ .-]?\(?\d{1,4}\)?){2,5}+(?![\w])")
# Trunk-prefixed numbers such as 020 7946 0958.
_PHONE_TRUNK = _compile(r"(?<![\w.,+-])0\d{1,4}(?>[ -]\d{2,4}){1,3}+(?![\w-])")
_PHONE_PART = _compile(r"\+|\d+")
_MIN_PHONE_DIGITS = 7
_DOTTED_NUMBERS = _compile(r"(?<![\w.])(?>\d+(?:\.\d+){2,})(?![\w]|\.\d)")


def _phone(match: re.Match[str]) -> str:
    parts = _PHONE_PART.findall(match.group())
    if sum(len(p) for p in parts if p != "+") < _MIN_PHONE_DIGITS:
        return match.group()
    words = ["plus" if p == "+" else digits_to_words(p) for p in parts]
    # Commas between groups give the listener the pauses they expect.
    if words[0] == "plus" and len(words) > 1:
        words[:2] = [f"plus {words[1]}"]
    return ", ".join(words)


def _dotted_numbers(match: re.Match[str]) -> str:
    return " dot ".join(_number_text_to_words(part) for part in match.group().split("."))


# =============================================================================
# Pass 5: ranges, money, percentages, decades, ordinals, fractions, units
# =============================================================================

_RANGE = _compile(rf"(?<![\w.,:/-])({_NUM})(?:-|\s?–\s?)(?=[$€£¥]?\d)")
_ARITHMETIC = _compile(r"(?<=\d)\s*([+=×])\s*(?=[-−]?\d)")
_ARITHMETIC_WORDS = {"+": "plus", "=": "equals", "×": "times"}

_CURRENCIES: dict[str, tuple[str, str, str | None, str | None]] = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", None, None),
    "₹": ("rupee", "rupees", "paisa", "paise"),
}
_CURRENCY_CODES = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "INR": "₹"}
_SCALE_WORDS = {
    "thousand": "thousand", "million": "million", "billion": "billion",
    "trillion": "trillion", "k": "thousand", "K": "thousand", "M": "million",
    "bn": "billion", "B": "billion",
}  # fmt: skip
_SCALE = r"(?:\s(thousand|million|billion|trillion)|(k|K|M|bn|B))(?![A-Za-z])"
_MONEY_PREFIX = _compile(
    rf"(?<![A-Za-z0-9.,])({_SIGN})([$€£¥₹]|(?:USD|EUR|GBP|JPY|INR)\s?)\s?({_NUM})(?:{_SCALE})?"
)
_MONEY_SUFFIX = _compile(
    rf"{_NUM_START}({_SIGN})({_NUM})(?:{_SCALE})?\s?([€£¥₹]|(?:USD|EUR|GBP|JPY|INR)\b)"
)
_PERCENT = _compile(rf"{_NUM_START}({_SIGN}{_NUM})\s?%")
_DECADE_FULL = _compile(r"(?<![\w'])(1[0-9]|20)([0-9])0'?s(?![\w'])")
_DECADE_SHORT = _compile(r"(?<![\w'])(?:'([1-9]0)|([2-9]0))'?s(?![\w'])")
_ORDINAL = _compile(r"(?<![A-Za-z0-9.,])(?>(\d+(?:,\d{3}(?!\d))*))(?i:st|nd|rd|th)(?![A-Za-z])")
_MIXED_FRACTION = _compile(r"(?<![\w.,/])(?>(\d+)\s(\d+)/(\d+))(?![\d/])")
_FRACTION = _compile(r"(?<![\w.,/])(?>(\d+)/(\d+))(?![\d/])")
_FRACTION_IDIOMS = {"24/7": "twenty-four seven", "9/11": "nine eleven", "50/50": "fifty-fifty"}

# unit → (singular, plural). American spellings.
_UNITS = {
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "m/s": ("meter per second", "meters per second"),
    "mph": ("mile per hour", "miles per hour"),
    "km": ("kilometer", "kilometers"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "m": ("meter", "meters"), "mi": ("mile", "miles"),
    "ft": ("foot", "feet"), "kg": ("kilogram", "kilograms"), "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"), "lbs": ("pound", "pounds"), "lb": ("pound", "pounds"),
    "°C": ("degree Celsius", "degrees Celsius"), "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
    "TB": ("terabyte", "terabytes"), "GB": ("gigabyte", "gigabytes"),
    "MB": ("megabyte", "megabytes"), "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "GHz": ("gigahertz", "gigahertz"), "MHz": ("megahertz", "megahertz"),
    "kHz": ("kilohertz", "kilohertz"), "Hz": ("hertz", "hertz"),
    "ms": ("millisecond", "milliseconds"), "sec": ("second", "seconds"), "s": ("second", "seconds"),
    "min": ("minute", "minutes"), "hrs": ("hour", "hours"), "hr": ("hour", "hours"),
    "h": ("hour", "hours"), "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"), "L": ("liter", "liters"),
}  # fmt: skip
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
# A period right after the unit is the abbreviation's own when a lowercase word follows.
_UNIT = _compile(
    rf"{_NUM_START}({_SIGN}{_NUM})\s?({_UNIT_ALT})(?![A-Za-z0-9/°])(?:\.(?=\s+[a-z]))?"
)
# "in" is a unit only when glued to the number ("12in"); "5 in the box" is a preposition.
_INCH = _compile(rf"{_NUM_START}({_SIGN}{_NUM})in(?![A-Za-z0-9])")


def _range(match: re.Match[str]) -> str:
    return match.group(1) + " to "


def _money_words(sign: str, symbol: str, amount: str, scale: str | None) -> str:
    symbol = _CURRENCY_CODES.get(symbol.strip(), symbol.strip())
    one, many, cent, cents = _CURRENCIES[symbol]
    prefix = "minus " if sign else ""
    if scale:
        return f"{prefix}{_number_text_to_words(amount)} {_SCALE_WORDS[scale]} {many}"
    whole, _, fraction = amount.replace(",", "").partition(".")
    # Dollars and cents only for an amount a cardinal can say; a longer run of
    # digits is read digit by digit below (int() refuses over 4,300 digits).
    if (
        fraction
        and len(fraction) <= 2
        and len(whole) <= _MAX_CARDINAL_DIGITS
        and cent is not None
        and cents is not None
    ):
        whole_value = int(whole) if whole else 0
        minor = int(fraction.ljust(2, "0"))
        parts = []
        if whole_value or not minor:
            parts.append(f"{number_to_words(whole_value)} {one if whole_value == 1 else many}")
        if minor:
            parts.append(f"{number_to_words(minor)} {cent if minor == 1 else cents}")
        return prefix + " and ".join(parts)
    unit = one if _is_one(amount) else many
    return f"{prefix}{_number_text_to_words(amount)} {unit}"


def _money_prefix(match: re.Match[str]) -> str:
    sign, symbol, amount = match.group(1, 2, 3)
    return _money_words(sign, symbol, amount, match.group(4) or match.group(5))


def _money_suffix(match: re.Match[str]) -> str:
    sign, amount = match.group(1, 2)
    return _money_words(sign, match.group(5), amount, match.group(3) or match.group(4))


def _percent(match: re.Match[str]) -> str:
    return _number_text_to_words(match.group(1)) + " percent"


def _decade_full(match: re.Match[str]) -> str:
    year = int(match.group(1)) * 100 + int(match.group(2)) * 10
    return _plural_of_words(year_to_words(year))


def _decade_short(match: re.Match[str]) -> str:
    return _plural_of_words(number_to_words(int(match.group(1) or match.group(2))))


def _ordinal(match: re.Match[str]) -> str:
    digits = match.group(1).replace(",", "")
    if len(digits) > _MAX_CARDINAL_DIGITS:
        return match.group()
    return ordinal_to_words(int(digits))


def _fraction_words(numerator: int, denominator: int) -> str:
    count = number_to_words(numerator)
    if denominator == 2:
        name = "half" if numerator == 1 else "halves"
    elif denominator == 4:
        name = "quarter" if numerator == 1 else "quarters"
    elif 3 <= denominator <= 20 or denominator in (100, 1000):
        name = ordinal_to_words(denominator)
        name = name if numerator == 1 else name + "s"
    else:
        return f"{count} over {number_to_words(denominator)}"
    return f"{count} {name}"


def _fraction(match: re.Match[str]) -> str:
    if match.group() in _FRACTION_IDIOMS:
        return _FRACTION_IDIOMS[match.group()]
    numerator, denominator = match.group(1), match.group(2)
    if len(numerator) + len(denominator) > _MAX_CARDINAL_DIGITS:
        return match.group()
    return _fraction_words(int(numerator), int(denominator))


def _mixed_fraction(match: re.Match[str]) -> str:
    whole, numerator, denominator = match.group(1, 2, 3)
    if len(whole) + len(numerator) + len(denominator) > _MAX_CARDINAL_DIGITS:
        return match.group()
    fraction = _fraction_words(int(numerator), int(denominator))
    return f"{number_to_words(int(whole))} and {fraction}"


def _unit(match: re.Match[str]) -> str:
    amount, unit = match.group(1), match.group(2)
    one, many = _UNITS[unit]
    return f"{_number_text_to_words(amount)} {one if _is_one(amount) else many}"


def _inch(match: re.Match[str]) -> str:
    amount = match.group(1)
    return f"{_number_text_to_words(amount)} {'inch' if _is_one(amount) else 'inches'}"


# =============================================================================
# Pass 6: Roman numerals after a name, years, remaining numbers
# =============================================================================

# After these words a numeral is a count ("World War Two", "Chapter Four") ...
_ROMAN_COUNTED = _compile(
    r"\b(World War|Super Bowl|Chapter|Part|Volume|Book|Act|Scene|Phase|Section|Article|Round"
    r"|Level|Stage|Episode|Season|Type|Class)\s+([IVXL]+)\b(?!['\w])"
)
# ... after any other capitalised name it is a regnal number ("Henry the eighth").
# Single "I" is left alone: "Then I" is far more common than "Elizabeth I".
_ROMAN_REGNAL = _compile(r"\b([A-Z][a-z]+)\s+([IVX]{2,6})\b(?!['\w])")
_ROMAN_VALID = re.compile(r"(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}


def _roman_value(numeral: str) -> int:
    if not numeral or not _ROMAN_VALID.fullmatch(numeral):
        return 0
    total = 0
    for index, ch in enumerate(numeral):
        value = _ROMAN_VALUES[ch]
        following = _ROMAN_VALUES[numeral[index + 1]] if index + 1 < len(numeral) else 0
        total += -value if value < following else value
    return total


def _roman_counted(match: re.Match[str]) -> str:
    value = _roman_value(match.group(2))
    return f"{match.group(1)} {number_to_words(value)}" if value else match.group()


def _roman_regnal(match: re.Match[str]) -> str:
    value = _roman_value(match.group(2))
    return f"{match.group(1)} the {ordinal_to_words(value)}" if value else match.group()


# Words after which a four-digit number is a quantity, not a year.
_QUANTITY_WORDS = sorted(
    {plural.split()[0] for _, plural in _UNITS.values()}
    | {many for _, many, _, _ in _CURRENCIES.values()}
    | {"cents", "pence", "percent"}
)
_YEAR = _compile(
    r"(?<![A-Za-z0-9.,:/-])(1[1-9]\d\d|20\d\d)(?![0-9A-Za-z%°]|[.,]\d)"
    rf"(?!\s+(?:{'|'.join(_QUANTITY_WORDS)})\b)"
)
_LETTER_DIGIT = _compile(r"(?<=[A-Za-z])-?(?=\d)")
_DIGIT_LETTER = _compile(r"(?<=\d)(?=[A-Za-z])")
_MINUS_NUMBER = r"(?:(?<![A-Za-z0-9.,)\]])-)?"
_CARDINAL = _compile(rf"(?<![A-Za-z0-9.]){_MINUS_NUMBER}(?>\d+(?:,\d{{3}}(?!\d))*(?:\.\d+)?|\.\d+)")


def _year(match: re.Match[str]) -> str:
    return year_to_words(int(match.group(1)))


def _cardinal(match: re.Match[str]) -> str:
    return _number_text_to_words(match.group())


# =============================================================================
# Pass 7: symbols and acronyms
# =============================================================================

_AMPERSAND = _compile(r"\s*&\s*")
_LEFTOVER_SYMBOLS = _compile(r"[%°@#]")
_LEFTOVER_WORDS = {"%": " percent ", "°": " degrees ", "@": " at ", "#": " "}

# All-caps words people say as words rather than letter by letter.
_PRONOUNCED_ACRONYMS = frozenset(
    {
        "NASA", "NATO", "UNESCO", "UNICEF", "SCUBA", "LASER", "RADAR", "SONAR", "RAM",
        "GIF", "JPEG", "AIDS", "OPEC", "FIFA", "IKEA", "COVID", "NAFTA", "PIN", "ROM",
        "CAPTCHA", "WIFI", "YOLO", "FOMO", "SARS", "ASCII",
    }
)  # fmt: skip
_ACRONYM_REPLACEMENTS = {"OK": "okay"}
_DOTTED_ACRONYM = _compile(r"(?<![\w.])((?:[A-Z]\.){2,}+)")
_ACRONYM = _compile(r"(?<![\w'-])([A-Z]{2,5})(s|'s)?(?![\w'-])")
_NEIGHBOUR_AFTER = _compile(r" ([A-Za-z']+)")


def _is_shouted(word: str) -> bool:
    letters = word.replace("'", "")
    return len(letters) >= 2 and letters.isascii() and letters.isupper()


def _word_before(text: str, start: int) -> str:
    """The word separated by one space before ``start`` (whitespace is collapsed by now)."""
    if start < 2 or text[start - 1] != " ":
        return ""
    begin = end = start - 1
    # Bounded walk: a word longer than this is no acronym's neighbour worth checking.
    while begin > 0 and end - begin < 40 and (text[begin - 1].isalpha() or text[begin - 1] == "'"):
        begin -= 1
    return text[begin:end]


def _in_shouted_text(match: re.Match[str]) -> bool:
    """An all-caps word next to other all-caps words is emphasis, not an acronym."""
    after = _NEIGHBOUR_AFTER.match(match.string, match.end())
    return _is_shouted(_word_before(match.string, match.start())) or (
        after is not None and _is_shouted(after.group(1))
    )


def _acronym(match: re.Match[str]) -> str:
    word, suffix = match.group(1), match.group(2) or ""
    if word in _ACRONYM_REPLACEMENTS:
        return _ACRONYM_REPLACEMENTS[word] + suffix
    if word in _PRONOUNCED_ACRONYMS or _in_shouted_text(match):
        return match.group()
    return " ".join(word) + ("'s" if suffix else "")


def _dotted_acronym(match: re.Match[str]) -> str:
    return " ".join(match.group(1).replace(".", "")) + _period_if_sentence_end(match)


def _leftover_symbol(match: re.Match[str]) -> str:
    return _LEFTOVER_WORDS[match.group()]


# =============================================================================
# The pipeline
# =============================================================================

_SPACES = re.compile(r"[ \t]+")
_SPACE_BEFORE_PUNCTUATION = re.compile(r" +(?=[,.;:!?)])")


class _Pass(NamedTuple):
    pattern: re.Pattern[str]
    replacement: Replacement | str
    # Passes that only ever match digits are skipped for text without any: most
    # sentences have none, and it halves the cost of long prose.
    needs_digit: bool = False


_PASSES: tuple[_Pass, ...] = (
    _Pass(_EMAIL, _email),
    _Pass(_URL, _url),
    _Pass(_BARE_DOMAIN, _url),
    _Pass(_HASHTAG, _hashtag),
    _Pass(_NUMBER_SIGN, "number ", needs_digit=True),
    _Pass(_HANDLE, _handle),
    _Pass(_TITLE, _title),
    _Pass(_DR_ST, _dr_st),
    _Pass(_INLINE_ABBREVIATION, _inline_abbreviation),
    _Pass(_SENTENCE_ABBREVIATION, _sentence_abbreviation),
    _Pass(_VERSUS, "versus"),
    _Pass(_NUMBER_ABBREVIATION, "number ", needs_digit=True),
    _Pass(_FIGURE, lambda m: _FIGURE_WORDS[m.group(1)] + " ", needs_digit=True),
    _Pass(_MONTH_ABBREVIATION, _month_abbreviation),
    # Before the letter/digit split, which would cut "2024-03-15T14:30" apart.
    _Pass(_ISO_DATE, _iso_date, needs_digit=True),
    # Letters glued to digits ("COVID-19", "MP3", "v1.2") read better apart.
    _Pass(_LETTER_DIGIT, " ", needs_digit=True),
    _Pass(_SLASH_DATE, _slash_date, needs_digit=True),
    _Pass(_MONTH_DAY, _month_day, needs_digit=True),
    _Pass(_DAY_MONTH, _day_month, needs_digit=True),
    _Pass(_CLOCK, _clock, needs_digit=True),
    _Pass(_HOUR_AM_PM, _hour_am_pm, needs_digit=True),
    _Pass(_PHONE_NANP, _phone, needs_digit=True),
    _Pass(_PHONE_INTERNATIONAL, _phone, needs_digit=True),
    _Pass(_PHONE_TRUNK, _phone, needs_digit=True),
    _Pass(_DOTTED_NUMBERS, _dotted_numbers, needs_digit=True),
    _Pass(_RANGE, _range, needs_digit=True),
    _Pass(_MONEY_PREFIX, _money_prefix, needs_digit=True),
    _Pass(_MONEY_SUFFIX, _money_suffix, needs_digit=True),
    _Pass(_PERCENT, _percent, needs_digit=True),
    _Pass(_DECADE_FULL, _decade_full, needs_digit=True),
    _Pass(_DECADE_SHORT, _decade_short, needs_digit=True),
    _Pass(_ORDINAL, _ordinal, needs_digit=True),
    _Pass(_MIXED_FRACTION, _mixed_fraction, needs_digit=True),
    _Pass(_FRACTION, _fraction, needs_digit=True),
    _Pass(_UNIT, _unit, needs_digit=True),
    _Pass(_INCH, _inch, needs_digit=True),
    _Pass(_ROMAN_COUNTED, _roman_counted),
    _Pass(_ROMAN_REGNAL, _roman_regnal),
    _Pass(_YEAR, _year, needs_digit=True),
    _Pass(_ARITHMETIC, lambda m: _spaced(_ARITHMETIC_WORDS[m.group(1)]), needs_digit=True),
    _Pass(_DIGIT_LETTER, " ", needs_digit=True),
    _Pass(_CARDINAL, _cardinal, needs_digit=True),
    _Pass(_AMPERSAND, " and "),
    _Pass(_LEFTOVER_SYMBOLS, _leftover_symbol),
    _Pass(_DOTTED_ACRONYM, _dotted_acronym),
    _Pass(_ACRONYM, _acronym),
)
_ANY_DIGIT = re.compile(r"[0-9]")


def normalize_english(text: str) -> str:
    """Rewrite written English so every token is a word a G2P can say.

    Never raises: a pass that fails on some odd input is skipped (and logged), so
    the worst case is a less polished reading, not a failed request.
    """
    if not isinstance(text, str):
        text = str(text)
    text = _clean_characters(text)
    has_digit = _ANY_DIGIT.search(text) is not None
    for pattern, replacement, needs_digit in _PASSES:
        if needs_digit and not has_digit:
            continue
        try:
            text = pattern.sub(replacement, text)
        except Exception:  # a bug in one rule must not cost the user the whole request
            _log.exception("normalize_english: pass %s failed; skipped", pattern.pattern[:40])
    text = _SPACES.sub(" ", text)
    text = _SPACE_BEFORE_PUNCTUATION.sub("", text)
    return "\n".join(line.strip() for line in text.split("\n")).strip()
