"""An SSML tree (ssml_xml.parse_xml) walked into speakable items (pure).

Markup that changes *what* is said is resolved here into text: ``<sub
alias>`` becomes its alias, ``<say-as>`` spells, counts or dates its content,
and ``<phoneme ph>`` becomes the inline-phoneme form ``[word](/ph/)`` that
the text frontend speaks as given. Markup that changes *how* (voice,
xml:lang, prosody, emphasis) becomes the context of the text it holds, and
<break>, <p> and <s> pauses and line breaks. Tags outside the subset are
dropped (their text is still spoken, the tag never is) and named in the
warnings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any
from xml.etree.ElementTree import Element

from voxclone.errors import InvalidSsml
from voxclone.synth.text.ssml_document import MAX_BREAK_S, Prosody, SsmlBreak, SsmlItem, SsmlText
from voxclone.synth.text.ssml_values import (
    BREAK_STRENGTHS,
    EMPHASIS_LEVELS,
    PITCH_WORDS,
    RATE_WORDS,
    VOLUME_WORDS,
    pitch_value,
    rate_value,
    spelled,
    spoken_date,
    telephone,
    volume_value,
)
from voxclone.synth.text.ssml_xml import MAX_DEPTH, XML_LANG, local_name

# Standard tags with nothing to say here: skipped quietly, content and all
# (desc describes an audio clip; mark is a bookmark).
_SILENT = frozenset({"mark", "desc", "metadata", "lexicon"})
_TIME = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s)\s*", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
_SPACES = re.compile(r" {2,}")
_NEWLINES = re.compile(r" *\n[ \n]*")


@dataclass(frozen=True)
class WalkContext:
    """What the text inside an element is spoken with: inherited, changed by voice,
    lang, prosody and emphasis."""

    voice: str | None = None
    language: str | None = None
    prosody: Prosody = field(default_factory=Prosody)


class Walker:
    """Turns elements into ``items`` (SsmlText, SsmlBreak) and ``warnings``, in order."""

    def __init__(self) -> None:
        self.items: list[SsmlItem] = []
        self.warnings: list[str] = []
        self._buffer: list[str] = []
        self._context = WalkContext()

    # -- output ---------------------------------------------------------------
    def say(self, text: str, context: WalkContext) -> None:
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
    def walk(self, element: Element, context: WalkContext, depth: int) -> None:
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

    def element(self, el: Element, context: WalkContext, depth: int) -> None:
        tag = local_name(el.tag)
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
            if level not in EMPHASIS_LEVELS:
                self.warn(f"emphasis level '{level[:16]}' unknown; used moderate")
                level = "moderate"
            self.walk(
                el, replace(context, prosody=context.prosody.then(*EMPHASIS_LEVELS[level])), depth
            )
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
        rate = self._value(el, "rate", RATE_WORDS, rate_value)
        pitch = self._value(el, "pitch", PITCH_WORDS, pitch_value)
        volume = self._value(el, "volume", VOLUME_WORDS, volume_value)
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

    def _say_as(self, el: Element, context: WalkContext) -> str:
        text = _SPACE.sub(" ", "".join(el.itertext())).strip()
        kind = (el.get("interpret-as") or "").strip().lower()
        english = (context.language or "en").lower().startswith("en")
        if kind in ("characters", "spell-out", "verbatim"):
            return spelled(text, english)
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
            return telephone(text)
        if kind == "date":
            spoken = spoken_date(text, (el.get("format") or "").strip().lower(), english)
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
