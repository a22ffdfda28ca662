"""The SSML document model and the budgets a document is held to (pure).

A parsed document is a list of items in speaking order: ``SsmlText`` (plain
text plus the voice, language and prosody it is spoken with) and
``SsmlBreak`` (silence of a given length). Its breaks are bounded one by one
(MAX_BREAK_S) and all together (the silence budget, ``check_silence``), and
its whole length against the service's output limit (``check_output_s``),
all before any synthesis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from voxclone.errors import PayloadTooLarge

# A break longer than this is refused: the joiner's own ceiling for a pause.
MAX_BREAK_S = 10.0
# Silence the breaks of one document may add up to: at least this much (five
# minutes: a guided-meditation script's pauses), and beyond it no more than the
# document's own speech lasts at the normal pace (SPOKEN_CHARS_PER_S: Kokoro
# says 16-17 characters a second of Harvard sentences, pauses included; 15
# leans long). So markup can at most double the audio a
# text of its length gives, where 1,000 ten-second breaks in a 20 KB request
# made 10,000 s (480 MB of WAV, +1.8 GB of server memory).
SILENCE_FLOOR_S = 300.0
SPOKEN_CHARS_PER_S = 15.0


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
