"""Planning: a request's text (plain or SSML) as the chunks the engine will speak.

Each :class:`PlannedChunk` carries its voice and controls (SSML can change
both mid-text) and the silence after it. Text is planned when the plan is
made, so its errors surface before any audio; phonemes are made lazily, as
the chunks are taken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from voxclone.errors import InvalidInput
from voxclone.service.catalog import ResolvedVoice
from voxclone.synth.controls import ENERGY_RANGE, PITCH_RANGE, SPEED_RANGE, ResolvedControls
from voxclone.synth.text.frontend import Chunk, TextFrontend
from voxclone.synth.text.lexicon import Lexicon
from voxclone.synth.text.ssml import SsmlBreak, SsmlDocument, ssml_language


@dataclass(frozen=True)
class PlannedChunk:
    """One chunk as it will be spoken: its voice and controls (SSML can change
    both mid-text), the silence after it and, for the first, before it."""

    chunk: Chunk
    voice: ResolvedVoice
    controls: ResolvedControls
    pause_s: float
    lead_s: float = 0.0


def plan_text(
    frontend: TextFrontend,
    text: str,
    voice: ResolvedVoice,
    language: str,
    controls: ResolvedControls,
    *,
    fast_start: bool,
    lexicon: Lexicon | None,
) -> Iterator[PlannedChunk]:
    """Plain text in one voice, language and set of controls."""
    chunks = frontend.plan(text, language, fast_start=fast_start, lexicon=lexicon)
    # Pauses scale with the speed too, so the whole file (not only the
    # speech) is 1/speed as long; the last pause is the file's tail.
    paced = at_voice_pace(controls, voice)
    return (
        PlannedChunk(c, voice, paced, c.pause_after_s * paced.pause / paced.speed) for c in chunks
    )


def plan_ssml(
    frontend: TextFrontend,
    doc: SsmlDocument,
    voices: Mapping[str, ResolvedVoice],
    voice: ResolvedVoice,
    language: str,
    controls: ResolvedControls,
    *,
    fast_start: bool,
    lexicons: Callable[[str], Lexicon | None],
) -> Iterator[PlannedChunk]:
    """An SSML document: each text in its own language, voice (``voices``: every
    <voice name> resolved) and controls (the request's, with the prosody
    applied); a <break> is the exact silence it asks for."""
    parts: list[tuple[Iterator[Chunk], ResolvedVoice, ResolvedControls] | float] = []
    spoken = False
    for item in doc.items:
        if isinstance(item, SsmlBreak):
            parts.append(item.seconds)
            continue
        lang = ssml_language(item.language, frontend.languages) if item.language else language
        p = item.prosody
        seg_controls = replace(
            controls,
            speed=clamp(controls.speed * p.rate, SPEED_RANGE),
            pitch=clamp(controls.pitch + p.pitch, PITCH_RANGE),
            energy=clamp(controls.energy * p.volume, ENERGY_RANGE),
        )
        try:
            chunks = frontend.plan(
                item.text, lang, fast_start=fast_start and not spoken, lexicon=lexicons(lang)
            )
        except InvalidInput as exc:
            if exc.field == "text":  # a segment of punctuation only: nothing to say
                continue
            raise
        seg_voice = voices[item.voice] if item.voice else voice
        parts.append((chunks, seg_voice, at_voice_pace(seg_controls, seg_voice)))
        spoken = True
    if not spoken:
        raise InvalidInput("the SSML contains nothing that can be spoken", field="text")
    return join_ssml_parts(parts)


def units(chunk: Chunk) -> int:
    """What a chunk costs (its spoken units; chunks built by hand may lack them)."""
    return chunk.units or len(chunk.text)


def at_voice_pace(controls: ResolvedControls, voice: ResolvedVoice) -> ResolvedControls:
    """``controls`` relative to the voice's own pace (a clone's follows its reference)."""
    if voice.speed == 1.0:
        return controls
    return replace(controls, speed=clamp(controls.speed * voice.speed, SPEED_RANGE))


def clamp(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


def join_ssml_parts(
    parts: list[tuple[Iterator[Chunk], ResolvedVoice, ResolvedControls] | float],
) -> Iterator[PlannedChunk]:
    """Chunks of every SSML segment in order, numbered anew; a <break> becomes
    the exact silence after the chunk before it (before the first: a lead)."""
    index = 0
    held: PlannedChunk | None = None
    lead = 0.0
    for part in parts:
        if isinstance(part, float):
            if held is None:
                lead += part
            else:
                # An explicit break replaces the punctuation pause; it is not
                # scaled by speed or emotion (the markup asked for this length).
                held = replace(held, pause_s=part)
            continue
        chunks, voice, controls = part
        for chunk in chunks:
            if held is not None:
                yield held
            pause = chunk.pause_after_s * controls.pause / controls.speed
            held = PlannedChunk(replace(chunk, index=index), voice, controls, pause, lead)
            lead = 0.0
            index += 1
    if held is not None:
        yield held
