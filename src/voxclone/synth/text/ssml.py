"""A subset of SSML 1.1 turned into plain speech segments (pure: no I/O, no web types).

``parse_ssml`` reads ``<speak>`` documents with defusedxml, with DTDs refused
outright: a document type declaration is where entity-expansion bombs
("billion laughs") and external entities live, and SSML never needs one, so
the parser stops at it before expanding anything (memory stays flat). The
tree builder counts elements and nesting as the parser meets them and stops
at the limit, so a document of millions of empty tags costs the first few
thousand, not a tree of millions (12.9 s of CPU for 4 M before the count).

What a document may ask for is bounded at parse time too, before any
synthesis: each break (MAX_BREAK_S) and all of them together (the silence
budget, ``check_silence``), and prosody values to ranges a person means
(a volume of +7000 dB overflowed a float).

The result is a list of items in speaking order: ``SsmlText`` (plain text
plus the voice, language and prosody it is spoken with) and ``SsmlBreak``
(silence of a given length). Markup that changes *what* is said is resolved
here into text: ``<sub alias>`` becomes its alias, ``<say-as>`` spells,
counts or dates its content, and ``<phoneme ph>`` becomes the inline-phoneme
form ``[word](/ph/)`` that the text frontend speaks as given. Tags outside
the subset are dropped (their text is still spoken, the tag never is) and
named in ``warnings``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any
from xml.etree.ElementTree import Element, ParseError, TreeBuilder

from voxclone.errors import InvalidSsml, PayloadTooLarge

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# A break longer than this is refused: the joiner's own ceiling for a pause.
MAX_BREAK_S = 10.0
# Nesting a person writes is speak > p > s > voice > prosody > emphasis >
# say-as: about 7 levels; 32 leaves room for generated markup and keeps the
# walk's recursion (two frames a level) far from the interpreter's limit.
MAX_DEPTH = 32
# The longest text (max_text_chars, 100,000 by default) marked up sentence by
# sentence (<s>, a <break> and a <prosody> or <say-as> in each of ~1,500
# sentences) is ~6,000 elements; 10,000 is a tag every ten characters. Counted
# while parsing, so a bigger document stops there (~10 ms) with no tree built.
MAX_ELEMENTS = 10_000
# Silence the breaks of one document may add up to: at least this much (five
# minutes: a guided-meditation script's pauses), and beyond it no more than the
# document's own speech lasts at the normal pace (SPOKEN_CHARS_PER_S: Kokoro
# says 16-17 characters a second of Harvard sentences, pauses included; 15
# leans long). So markup can at most double the audio a
# text of its length gives, where 1,000 ten-second breaks in a 20 KB request
# made 10,000 s (480 MB of WAV, +1.8 GB of server memory).
SILENCE_FLOOR_S = 300.0
SPOKEN_CHARS_PER_S = 15.0
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
_RATES = {"x-slow": 0.6, "slow": 0.8, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.6}
_PITCHES = {"x-low": -0.3, "low": -0.15, "medium": 0.0, "default": 0.0, "high": 0.15, "x-high": 0.3}
_VOLUMES = {
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
_EMPHASIS = {
    "strong": (0.85, 0.08, 1.15),
    "moderate": (0.92, 0.04, 1.08),
    "none": (1.0, 0.0, 1.0),
    "reduced": (1.08, -0.03, 0.92),
}
_KNOWN = frozenset(
    {"speak", "p", "s", "break", "prosody", "say-as", "phoneme", "sub", "emphasis", "voice", "lang"}
)
# Standard tags with nothing to say here: skipped quietly, content and all
# (desc describes an audio clip; mark is a bookmark).
_SILENT = frozenset({"mark", "desc", "metadata", "lexicon"})
_TIME = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s)\s*", re.IGNORECASE)
_PERCENT = re.compile(r"\s*([+-]?)(\d+(?:\.\d+)?)\s*%\s*")
_SEMITONES = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*st\s*", re.IGNORECASE)
_DECIBELS = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*dB\s*", re.IGNORECASE)
_NUMBER = re.compile(r"\s*(\d+(?:\.\d+)?)\s*")
_SPACE = re.compile(r"\s+")
_SPEAK_TAG = re.compile(r"<speak[\s>/]")
_SPACES = re.compile(r" {2,}")
_NEWLINES = re.compile(r" *\n[ \n]*")
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


@dataclass(frozen=True)
class Prosody:
    """Relative to the request's own controls: speed ×rate, pitch +octaves, energy ×volume."""

    rate: float = 1.0
    pitch: float = 0.0
    volume: float = 1.0

    def then(self, rate: float = 1.0, pitch: float = 0.0, volume: float = 1.0) -> Prosody:
        return Prosody(self.rate * rate, self.pitch + pitch, self.volume * volume)


@dataclass(frozen=True)
class SsmlText:
    text: str
    voice: str | None = None
    language: str | None = None
    prosody: Prosody = field(default_factory=Prosody)


@dataclass(frozen=True)
class SsmlBreak:
    seconds: float


SsmlItem = SsmlText | SsmlBreak


@dataclass(frozen=True)
class SsmlDocument:
    items: tuple[SsmlItem, ...]
    language: str | None  # <speak xml:lang>
    warnings: tuple[str, ...] = ()

    @property
    def voices(self) -> frozenset[str]:
        return frozenset(i.voice for i in self.items if isinstance(i, SsmlText) and i.voice)


def looks_like_ssml(text: str) -> bool:
    """True when ``text`` is an SSML document (starts with ``<speak``, maybe after
    ``<?xml``), or an XML document type declaration."""
    head = text.lstrip()[:256]
    if head.startswith("<?xml"):
        end = head.find("?>")
        head = head[end + 2 :].lstrip() if end >= 0 else ""
    if head[:9].upper() == "<!DOCTYPE":
        # A document type before <speak>: SSML never needs one and entity
        # bombs live there, so it goes to the parser, which refuses it. An
        # HTML page (no <speak>) stays plain text, its markup stripped.
        return _SPEAK_TAG.search(text) is not None
    return head.startswith("<speak") and (len(head) == 6 or not head[6].isalnum())


def as_document(text: str) -> str:
    """``text`` as an SSML document: wrapped in ``<speak>`` unless it already is one."""
    return text if looks_like_ssml(text) else f"<speak>{text}</speak>"


def parse_ssml(text: str) -> SsmlDocument:
    """Parse ``text`` (an SSML document); InvalidInput naming line and column when
    malformed, PayloadTooLarge past MAX_ELEMENTS or the silence budget."""
    root = _parse_xml(text)
    if _local(root.tag) != "speak":
        raise InvalidSsml(
            f"SSML must have <speak> as its root element, not <{_local(root.tag)[:32]}>",
            field="text",
        )
    walker = _Walker()
    language = root.get(XML_LANG)
    walker.walk(root, _Context(language=language), depth=0)
    walker.flush()
    doc = SsmlDocument(tuple(walker.items), language, tuple(walker.warnings))
    check_silence(doc)
    return doc


def ssml_silence_s(doc: SsmlDocument) -> float:
    """Seconds of silence ``doc``'s breaks ask for, all together."""
    return sum(item.seconds for item in doc.items if isinstance(item, SsmlBreak))


def ssml_spoken_chars(doc: SsmlDocument) -> int:
    """Characters of text ``doc`` speaks (before normalization expands numbers)."""
    return sum(len(item.text) for item in doc.items if isinstance(item, SsmlText))


def silence_budget_s(spoken_chars: int) -> float:
    """The most break silence a document speaking ``spoken_chars`` characters may hold."""
    return max(SILENCE_FLOOR_S, spoken_chars / SPOKEN_CHARS_PER_S)


def check_silence(doc: SsmlDocument) -> None:
    """PayloadTooLarge (413) when ``doc``'s breaks add up to more than its budget."""
    silence = ssml_silence_s(doc)
    budget = silence_budget_s(ssml_spoken_chars(doc))
    if silence > budget:
        raise PayloadTooLarge(
            f"the SSML breaks add up to {silence:.0f} s of silence; at most {budget:.0f} s "
            f"(the longer of {SILENCE_FLOOR_S:.0f} s and as long as the text takes to say)",
            field="text",
            limit=round(budget, 1),
            value=round(silence, 1),
        )


def check_output_s(doc: SsmlDocument, *, limit_s: float, speed: float = 1.0) -> None:
    """PayloadTooLarge (413) when ``doc`` would last longer than ``limit_s``
    (Settings.max_output_s): its text at ``speed`` (the request's speed
    multiplier) plus its breaks, which are not scaled by speed."""
    speech = ssml_spoken_chars(doc) / (SPOKEN_CHARS_PER_S * max(speed, 1e-3))
    total = speech + ssml_silence_s(doc)
    if total > limit_s:
        raise PayloadTooLarge(
            f"the SSML would give about {total:.0f} s of audio; at most {limit_s:.0f} s "
            "per request (max_output_s)",
            field="text",
            limit=limit_s,
            value=round(total, 1),
        )


class _CountingBuilder(TreeBuilder):
    """A tree builder that refuses the element past MAX_ELEMENTS or MAX_DEPTH as
    the parser meets it (the exception stops expat there)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0
        self.depth = 0

    def start(self, tag: Any, attrs: Any) -> Element:
        self.elements += 1
        self.depth += 1
        if self.elements > MAX_ELEMENTS:
            raise PayloadTooLarge(
                f"SSML has more than {MAX_ELEMENTS} elements",
                field="text",
                limit=MAX_ELEMENTS,
            )
        if self.depth > MAX_DEPTH:
            raise InvalidSsml(
                f"SSML is nested deeper than {MAX_DEPTH} elements", field="text", limit=MAX_DEPTH
            )
        return super().start(tag, attrs)

    def end(self, tag: Any) -> Element:
        self.depth -= 1
        return super().end(tag)


def _parse_xml(text: str) -> Element:
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import DefusedXMLParser

    parser = DefusedXMLParser(
        target=_CountingBuilder(), forbid_dtd=True, forbid_entities=True, forbid_external=True
    )
    try:
        parser.feed(text)
        root: Element = parser.close()
        return root
    except ParseError as exc:
        line, column = getattr(exc, "position", (0, 0))
        # expat's message ends with its own "line 1, column 5"; say it once, 1-based.
        reason = str(exc).split(":")[0]
        raise InvalidSsml(
            f"SSML is not well-formed: {reason} at line {line}, column {column + 1}",
            field="text",
            limit={"line": line, "column": column + 1},
        ) from None
    except DefusedXmlException:
        raise InvalidSsml(
            "SSML must not contain a DTD, entity declarations or external references",
            field="text",
        ) from None


def _local(tag: Any) -> str:
    """Tag name without its namespace (``{http://www.w3.org/2001/10/synthesis}speak``)."""
    if not isinstance(tag, str):  # comments and processing instructions
        return ""
    return tag.rsplit("}", 1)[-1].lower()


@dataclass(frozen=True)
class _Context:
    voice: str | None = None
    language: str | None = None
    prosody: Prosody = field(default_factory=Prosody)


class _Walker:
    def __init__(self) -> None:
        self.items: list[SsmlItem] = []
        self.warnings: list[str] = []
        self._buffer: list[str] = []
        self._context = _Context()

    # -- output ---------------------------------------------------------------
    def say(self, text: str, context: _Context) -> None:
        text = _SPACE.sub(" ", text)
        if not text.strip():
            if self._buffer:
                self._buffer.append(" ")
            return
        if context != self._context:
            self.flush()
            self._context = context
        self._buffer.append(text)

    def boundary(self, mark: str) -> None:
        """A paragraph or sentence edge: a line break the sentence splitter honours."""
        if self._buffer:
            self._buffer.append(mark)

    def flush(self) -> None:
        text = _NEWLINES.sub("\n", _SPACES.sub(" ", "".join(self._buffer))).strip()
        self._buffer = []
        if text:
            c = self._context
            self.items.append(SsmlText(text, c.voice, c.language, c.prosody))

    def pause(self, seconds: float) -> None:
        if seconds <= 0:  # strength="none": no pause, but still a word boundary
            if self._buffer:
                self._buffer.append(" ")
            return
        self.flush()
        if self.items and isinstance(self.items[-1], SsmlBreak):
            seconds = min(MAX_BREAK_S, self.items[-1].seconds + seconds)
            self.items[-1] = SsmlBreak(seconds)
        else:
            self.items.append(SsmlBreak(seconds))

    def warn(self, message: str) -> None:
        if message not in self.warnings and len(self.warnings) < 16:
            self.warnings.append(message)

    # -- the tree -------------------------------------------------------------
    def walk(self, element: Element, context: _Context, depth: int) -> None:
        # _CountingBuilder refused deeper trees while parsing; this guards a
        # tree built some other way.
        if depth > MAX_DEPTH:
            raise InvalidSsml(
                f"SSML is nested deeper than {MAX_DEPTH} elements", field="text", limit=MAX_DEPTH
            )
        if element.text:
            self.say(element.text, context)
        for child in element:
            self.element(child, context, depth + 1)
            if child.tail:
                self.say(child.tail, context)

    def element(self, el: Element, context: _Context, depth: int) -> None:
        tag = _local(el.tag)
        if not tag or tag in _SILENT:
            return
        if tag == "break":
            self.pause(self._break_seconds(el))
        elif tag in ("p", "s"):
            self.boundary("\n\n" if tag == "p" else "\n")
            self.walk(el, context, depth)
            self.boundary("\n\n" if tag == "p" else "\n")
        elif tag == "prosody":
            self.walk(el, replace(context, prosody=self._prosody(el, context.prosody)), depth)
        elif tag == "emphasis":
            level = (el.get("level") or "moderate").strip().lower()
            if level not in _EMPHASIS:
                self.warn(f"emphasis level '{level[:16]}' unknown; used moderate")
                level = "moderate"
            self.walk(el, replace(context, prosody=context.prosody.then(*_EMPHASIS[level])), depth)
        elif tag == "voice":
            name = (el.get("name") or "").strip()
            if not name:
                self.warn("<voice> without a name is ignored")
            self.walk(el, replace(context, voice=name or context.voice), depth)
        elif tag == "lang":
            language = (el.get(XML_LANG) or "").strip()
            self.walk(el, replace(context, language=language or context.language), depth)
        elif tag == "sub":
            alias = el.get("alias")
            if alias is None:
                self.warn("<sub> without an alias: its text is spoken")
                self.walk(el, context, depth)
            else:
                self.say(f" {alias} ", context)
        elif tag == "say-as":
            self.say(f" {self._say_as(el, context)} ", context)
        elif tag == "phoneme":
            self.say(f" {self._phoneme(el)} ", context)
        elif tag == "speak":
            self.warn("nested <speak> treated as its content")
            self.walk(el, context, depth)
        else:
            # Unknown or unsupported (audio, …): the tag is dropped, its text spoken.
            self.warn(f"<{tag[:32]}> is not supported and was ignored")
            self.walk(el, context, depth)

    # -- attributes -------------------------------------------------------------
    def _break_seconds(self, el: Element) -> float:
        time = el.get("time")
        if time is not None:
            match = _TIME.fullmatch(time)
            if match is None:
                raise InvalidSsml(
                    f"<break time='{time[:24]}'>: write the time as e.g. 500ms or 1.5s",
                    field="text",
                )
            seconds = float(match.group(1)) / (1000.0 if match.group(2).lower() == "ms" else 1.0)
            if seconds > MAX_BREAK_S:
                raise InvalidSsml(
                    f"<break> is longer than {MAX_BREAK_S:g} s",
                    field="text",
                    limit=MAX_BREAK_S,
                    value=seconds,
                )
            return seconds
        strength = (el.get("strength") or "medium").strip().lower()
        if strength not in BREAK_STRENGTHS:
            raise InvalidSsml(
                f"<break strength='{strength[:16]}'> is not one of {', '.join(BREAK_STRENGTHS)}",
                field="text",
                limit=list(BREAK_STRENGTHS),
            )
        return BREAK_STRENGTHS[strength]

    def _prosody(self, el: Element, base: Prosody) -> Prosody:
        rate = self._value(el, "rate", _RATES, _rate_value)
        pitch = self._value(el, "pitch", _PITCHES, _pitch_value)
        volume = self._value(el, "volume", _VOLUMES, _volume_value)
        return base.then(
            1.0 if rate is None else rate,
            0.0 if pitch is None else pitch,
            1.0 if volume is None else volume,
        )

    def _value(
        self,
        el: Element,
        name: str,
        words: dict[str, float],
        parse: Any,
    ) -> float | None:
        raw = el.get(name)
        if raw is None:
            return None
        word = raw.strip().lower()
        if word in words:
            return words[word]
        value = parse(raw)  # raises InvalidSsml when outside its range
        if value is None:
            self.warn(f"<prosody {name}='{raw[:24]}'> not understood; ignored")
            return None
        return float(value)

    def _say_as(self, el: Element, context: _Context) -> str:
        text = _SPACE.sub(" ", "".join(el.itertext())).strip()
        kind = (el.get("interpret-as") or "").strip().lower()
        english = (context.language or "en").lower().startswith("en")
        if kind in ("characters", "spell-out", "verbatim"):
            return _spelled(text, english)
        if kind in ("cardinal", "number"):
            digits = text.replace(",", "").replace(" ", "")
            if english and re.fullmatch(r"-?\d{1,15}", digits):
                from voxclone.synth.text.normalize_en import number_to_words

                return number_to_words(int(digits))
            return digits
        if kind == "ordinal":
            digits = re.sub(r"\D", "", text)
            if english and digits and len(digits) <= 15:
                from voxclone.synth.text.normalize_en import ordinal_to_words

                return ordinal_to_words(int(digits))
            if digits:
                self.warn("say-as ordinal is read as a number outside English")
            return text
        if kind == "digits":
            return " ".join(ch for ch in text if ch.isdigit())
        if kind == "telephone":
            return _telephone(text)
        if kind == "date":
            spoken = _date(text, (el.get("format") or "").strip().lower(), english)
            if spoken is None:
                self.warn(f"say-as date '{text[:24]}' not understood; read as written")
                return text
            return spoken
        self.warn(f"say-as interpret-as='{kind[:24]}' is not supported; read as written")
        return text

    def _phoneme(self, el: Element) -> str:
        word = _SPACE.sub(" ", "".join(el.itertext())).strip()
        alphabet = (el.get("alphabet") or "ipa").strip().lower()
        ph = (el.get("ph") or "").strip()
        if alphabet != "ipa" or not ph:
            self.warn(f"<phoneme alphabet='{alphabet[:16]}'> needs alphabet='ipa' and a ph")
            return word
        # The inline form's own delimiters cannot appear inside it.
        ph = re.sub(r"[\[\]()/]", "", ph)
        return f"[{word.replace('[', '').replace(']', '')}](/{ph}/)"


def _out_of_range(name: str, raw: str, low: str, high: str) -> InvalidSsml:
    return InvalidSsml(
        f"<prosody {name}='{raw.strip()[:24]}'> is outside {low} to {high}",
        field="text",
        limit={"attribute": name, "min": low, "max": high},
        value=raw.strip()[:24],
    )


def _within(value: float, bounds: tuple[float, float]) -> bool:
    return math.isfinite(value) and bounds[0] <= value <= bounds[1]


def _rate_value(raw: str) -> float | None:
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


def _pitch_value(raw: str) -> float | None:
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


def _volume_value(raw: str) -> float | None:
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


def _spelled(text: str, english: bool) -> str:
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


def _telephone(text: str) -> str:
    """Digit by digit, a comma between groups: "555-0134" → "5 5 5, 0 1 3 4"."""
    groups = re.findall(r"\+|\d+", text)
    spoken = ["plus" if g == "+" else " ".join(g) for g in groups]
    return ", ".join(spoken) if spoken else text


def _date(text: str, fmt: str, english: bool) -> str | None:
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


def ssml_language(code: str, supported: tuple[str, ...]) -> str:
    """An xml:lang value ("en-US", "fr-FR", "pt-BR") as one of ``supported`` codes."""
    wanted = code.strip().lower().replace("_", "-")
    if wanted in supported:
        return wanted
    if wanted == "en" and "en-us" in supported:
        return "en-us"
    base = wanted.split("-")[0]
    if base in supported:
        return base
    matches = [s for s in supported if s.split("-")[0] == base]
    if matches:
        return matches[0]
    from voxclone.errors import UnsupportedLanguage

    raise UnsupportedLanguage(
        f"xml:lang '{code[:16]}' is not supported; supported: {', '.join(sorted(supported))}",
        field="language",
        limit=sorted(supported),
    )
