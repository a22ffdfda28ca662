"""Voice blends: ``voice="alice(2)+clear_male(1)"`` speaks a weighted mix of voices.

A style engine (Kokoro) speaks from a style vector per voice, so a blend is the
weighted mean of the voices' style packs (weights normalised to sum to 1), and
of their tone curves when cloned voices take part (a voice without one counts
as flat). A prompt engine (Pocket TTS) clones from a reference prompt, for
which no meaningful average exists: blending its voices is refused with a
clear error instead of guessed at.

Blends are resolved on every request and never cached: the cache purges by
voice id, and deleting any voice of a blend must leave nothing of it behind.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from voxclone.errors import InvalidInput
from voxclone.synth.audio.tone import ToneFilter

BLEND_PREFIX = "blend:"
MAX_BLEND_VOICES = 4
MAX_WEIGHT = 100.0
_SHAPE = "'alice(2)+clear_male(1)' (2 to 4 voices, weights > 0, default 1)"
_TERM = re.compile(r"^(?P<name>[^()]*?)\s*(?:\(\s*(?P<weight>[^()]*?)\s*\))?$")


@dataclass(frozen=True)
class BlendTerm:
    name: str
    weight: float


def is_blend_id(voice_id: str) -> bool:
    return voice_id.startswith(BLEND_PREFIX)


def parse_blend(expression: str) -> list[BlendTerm] | None:
    """The terms of a blend expression; None if ``expression`` is not one (no '+')."""
    if "+" not in expression:
        return None
    parts = expression.split("+")
    if len(parts) > MAX_BLEND_VOICES:
        raise InvalidInput(
            f"a voice blend mixes at most {MAX_BLEND_VOICES} voices: {_SHAPE}",
            field="voice",
            limit=MAX_BLEND_VOICES,
        )
    terms: list[BlendTerm] = []
    for part in parts:
        match = _TERM.match(part.strip())
        name = match.group("name").strip() if match else ""
        raw = match.group("weight") if match else None
        try:
            weight = 1.0 if raw is None else float(raw)
        except ValueError:
            weight = math.nan
        if not name or not math.isfinite(weight) or not 0 < weight <= MAX_WEIGHT:
            raise InvalidInput(
                f"a voice blend must look like {_SHAPE}", field="voice", limit=MAX_WEIGHT
            )
        terms.append(BlendTerm(name, weight))
    return terms


@dataclass(frozen=True)
class BlendPart:
    """One resolved voice of a blend (duck-typed on the catalog's ResolvedVoice)."""

    id: str
    version: int
    style: np.ndarray | None
    tone: ToneFilter | None
    engine: str
    language: str | None
    prompt: object | None
    weight: float


def blend_style(parts: Sequence[BlendPart]) -> tuple[np.ndarray, ToneFilter | None, str]:
    """The blended style pack, tone and id of ``parts`` (same engine, style voices)."""
    engines = {p.engine for p in parts}
    if len(engines) != 1:
        raise InvalidInput(
            "the voices of a blend must belong to one engine "
            f"(these belong to {', '.join(sorted(engines))})",
            field="voice",
            limit=sorted(engines),
        )
    (engine,) = engines
    if any(p.style is None or p.prompt is not None for p in parts):
        raise InvalidInput(
            f"the {engine} engine clones from a reference prompt, which cannot be averaged; "
            "blend voices of a style engine (kokoro) instead",
            field="voice",
            limit=engine,
        )
    shapes = {p.style.shape for p in parts if p.style is not None}
    if len(shapes) != 1:
        raise InvalidInput("these voices' styles cannot be mixed", field="voice")
    total = sum(p.weight for p in parts)
    weights = [p.weight / total for p in parts]
    style = np.zeros(next(iter(shapes)), np.float64)
    for part, weight in zip(parts, weights, strict=True):
        assert part.style is not None
        style += weight * part.style.astype(np.float64)
    tone = None
    if any(p.tone is not None for p in parts):
        gain = sum(
            w * (p.tone.gain_db if p.tone is not None else 0.0)
            for p, w in zip(parts, weights, strict=True)
        )
        tone = ToneFilter(np.asarray(gain, np.float32))
    blend_id = BLEND_PREFIX + "+".join(
        f"{p.id}@{p.version}*{w:.4f}" for p, w in zip(parts, weights, strict=True)
    )
    return style.astype(np.float32), tone, blend_id
