"""What SSML attribute values and say-as contents mean (pure).

Break strengths and prosody words as numbers; prosody values written as
numbers (percentages, semitones, decibels) checked against ranges a person
means before they are used (a volume of +7000 dB is 10^350, past a float);
and the say-as readings that are no plain number: spelled out, telephone
numbers, dates.
"""

from __future__ import annotations

import math
import re

from voxclone.errors import InvalidSsml

# <prosody> ranges: the service clamps speed, pitch and energy to its own
# narrower ranges; values beyond these are mistakes (or attacks: +7000 dB is
# 10^350, past a float) and are refused rather than silently clamped.
RATE_RANGE = (0.1, 10.0)  # multiplier: 10% to 1000%
PITCH_OCTAVES = (-2.0, 2.0)  # ±24 st; as a percentage -75% to +300%
VOLUME_DB = (-40.0, 40.0)
VOLUME_FACTOR = (0.0, 10.0)  # as a percentage: 0% to 1000%
# say-as date parts longer than a year's or a day's digits are no date: read as written.
_DATE_PART_DIGITS = {"y": 4, "m": 2, "d": 2}

# SSML 1.1 §3.2.3 leaves the strengths' lengths to the processor; these follow
# the punctuation pauses the joiner uses (comma ≈ medium, sentence ≈ strong).
BREAK_STRENGTHS: dict[str, float] = {
    "none": 0.0,
    "x-weak": 0.1,
    "weak": 0.25,
    "medium": 0.4,
    "strong": 0.7,
    "x-strong": 1.0,
}
# Speaking-rate multipliers, pitch shifts in octaves, energy multipliers.
RATE_WORDS = {
    "x-slow": 0.6,
    "slow": 0.8,
    "medium": 1.0,
    "default": 1.0,
    "fast": 1.25,
    "x-fast": 1.6,
}
PITCH_WORDS = {
    "x-low": -0.3,
    "low": -0.15,
    "medium": 0.0,
    "default": 0.0,
    "high": 0.15,
    "x-high": 0.3,
}
VOLUME_WORDS = {
    "silent": 0.8,
    "x-soft": 0.8,
    "soft": 0.9,
    "medium": 1.0,
    "default": 1.0,
    "loud": 1.1,
    "x-loud": 1.2,
}
# <emphasis level>: (rate, pitch, volume) — stressed words come slower, a little
# higher and louder; reduced ones the opposite.
EMPHASIS_LEVELS = {
    "strong": (0.85, 0.08, 1.15),
    "moderate": (0.92, 0.04, 1.08),
    "none": (1.0, 0.0, 1.0),
    "reduced": (1.08, -0.03, 0.92),
}
_PERCENT = re.compile(r"\s*([+-]?)(\d+(?:\.\d+)?)\s*%\s*")
_SEMITONES = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*st\s*", re.IGNORECASE)
_DECIBELS = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*dB\s*", re.IGNORECASE)
_NUMBER = re.compile(r"\s*(\d+(?:\.\d+)?)\s*")
_LETTER_NAMES = dict(
    zip(
        "abcdefghijklmnopqrstuvwxyz",
        [
            "ay",
            "bee",
            "see",
            "dee",
            "ee",
            "ef",
            "gee",
            "aitch",
            "eye",
            "jay",
            "kay",
            "el",
            "em",
            "en",
            "oh",
            "pee",
            "cue",
            "ar",
            "ess",
            "tee",
            "you",
            "vee",
            "double-you",
            "ex",
            "why",
            "zee",
        ],
        strict=True,
    )
)


def _out_of_range(name: str, raw: str, low: str, high: str) -> InvalidSsml:
    return InvalidSsml(
        f"<prosody {name}='{raw.strip()[:24]}'> is outside {low} to {high}",
        field="text",
        limit={"attribute": name, "min": low, "max": high},
        value=raw.strip()[:24],
    )


def _within(value: float, bounds: tuple[float, float]) -> bool:
    return math.isfinite(value) and bounds[0] <= value <= bounds[1]


def rate_value(raw: str) -> float | None:
    """A speaking-rate multiplier; InvalidSsml outside RATE_RANGE."""
    match = _PERCENT.fullmatch(raw)
    if match:
        sign, number = match.group(1), float(match.group(2))
        # Relative with a sign (+20% is 1.2 times as fast), else absolute (50%: half).
        rate = 1.0 + (number if sign == "+" else -number) / 100.0 if sign else number / 100.0
    else:
        plain = _NUMBER.fullmatch(raw)
        if plain is None:
            return None
        rate = float(plain.group(1))
    if not _within(rate, RATE_RANGE):
        low, high = (f"{100 * r:g}%" for r in RATE_RANGE)
        raise _out_of_range("rate", raw, low, high)
    return rate


def pitch_value(raw: str) -> float | None:
    """A pitch shift in octaves; InvalidSsml outside PITCH_OCTAVES."""
    low, high = PITCH_OCTAVES
    match = _SEMITONES.fullmatch(raw)
    if match:
        octaves = float(match.group(1)) / 12.0
        if not _within(octaves, PITCH_OCTAVES):
            raise _out_of_range("pitch", raw, f"{12 * low:+g}st", f"{12 * high:+g}st")
        return octaves
    match = _PERCENT.fullmatch(raw)
    if match:
        sign, number = match.group(1), float(match.group(2))
        factor = 1.0 + (-number if sign == "-" else number) / 100.0
        if not (math.isfinite(factor) and 2.0**low <= factor <= 2.0**high):
            raise _out_of_range(
                "pitch", raw, f"{100 * (2.0**low - 1):+g}%", f"{100 * (2.0**high - 1):+g}%"
            )
        return math.log2(factor)
    return None


def volume_value(raw: str) -> float | None:
    """An energy multiplier; InvalidSsml outside VOLUME_DB or VOLUME_FACTOR
    (checked before 10^(dB/20), which overflows a float past ~6,000 dB)."""
    match = _DECIBELS.fullmatch(raw)
    if match:
        db = float(match.group(1))
        if not _within(db, VOLUME_DB):
            raise _out_of_range("volume", raw, f"{VOLUME_DB[0]:+g}dB", f"{VOLUME_DB[1]:+g}dB")
        return float(10.0 ** (db / 20.0))
    match = _PERCENT.fullmatch(raw)
    if match:
        sign, number = match.group(1), float(match.group(2))
        factor = 1.0 + (-number if sign == "-" else number) / 100.0 if sign else number / 100.0
        if not _within(factor, VOLUME_FACTOR):
            low, high = (f"{100 * f:g}%" for f in VOLUME_FACTOR)
            raise _out_of_range("volume", raw, low, high)
        return factor
    return None


def spelled(text: str, english: bool) -> str:
    """One character at a time; English letters by name ("WHO" → "double-you aitch oh")."""
    out: list[str] = []
    for ch in text:
        if ch.isspace():
            continue
        if english and ch.lower() in _LETTER_NAMES:
            out.append(_LETTER_NAMES[ch.lower()])
        elif ch.isalnum():
            out.append(ch)
    return " ".join(out)


def telephone(text: str) -> str:
    """Digit by digit, a comma between groups: "555-0134" → "5 5 5, 0 1 3 4"."""
    groups = re.findall(r"\+|\d+", text)
    spoken = ["plus" if g == "+" else " ".join(g) for g in groups]
    return ", ".join(spoken) if spoken else text


def spoken_date(text: str, fmt: str, english: bool) -> str | None:
    parts = [p for p in re.split(r"[-/.\s]+", text) if p]
    if not english or not parts or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    if not fmt:
        fmt = "ymd" if len(parts) == 3 and len(parts[0]) == 4 else "mdy"
    fmt = fmt[: len(parts)]
    if len(fmt) != len(parts) or set(fmt) - set("ymd"):
        return None
    values = dict(zip(fmt, parts, strict=True))
    if any(len(values[part]) > _DATE_PART_DIGITS[part] for part in values):
        return None  # 5,000 digits are no year: read as written (digit by digit)
    from voxclone.synth.text.normalize_en import MONTHS, date_to_words, year_to_words

    year = values.get("y")
    if "m" not in values:
        return year_to_words(int(year)) if year else None
    month = int(values["m"])
    if not 1 <= month <= 12:
        return None
    if "d" not in values:
        name = MONTHS[month - 1]
        return f"{name} {year_to_words(int(year))}" if year else name
    day = int(values["d"])
    if not 1 <= day <= 31:
        return None
    return date_to_words(month, day, year, day_first=fmt.index("d") < fmt.index("m"))
