"""Never a plain built-in: the stock check's winner moved toward the reference.

When the product encoder hears a built-in voice about as close to a reference
as the instant clone (``StockCheck.compare``: synth/voice/stock_check.py), the
voice used to *be* that built-in, toned: 4 of 11 held-out clones and 9 of 17
a new user made came back as "speaks as the built-in voice X" (issue 47), and
a person who cloned their voice and hears a stock voice concludes the product
does not clone. Now the built-in is only the start: its timbre half is blended
with the clone's (``clone_share`` of the clone's), the prosody half is the
clone's pitch-calibrated one (the reference's F0), and the recording tone is
matched again for the blend. Each share in ``MOVE_SHARES`` is heard speaking
the probe sentence like the stock check hears, and the closest is kept, so
every enrolled voice is made from its recording (a share of 0 would be the
built-in again, a share of 1 the clone that lost).

Blends are linear in a :class:`VoiceRecipe`'s coordinates (timbre weights
and direction coefficients), so the blend stays inside the region the packs
span, like every atlas voice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from voxclone.synth.audio.tone import ToneFilter
from voxclone.synth.voice.style_space import VoiceRecipe

# Shares of the clone's timbre tried when a built-in won the stock check:
# three renders of the probe sentence (~0.4 s each on 2 cores), in the
# report's background step. On the 4 fit + validation speakers that started
# from a built-in (studies/stock_moved.py) the pick among them beat every
# fixed share in 3 of 4 leave-one-speaker-out folds (GE2E + CAM++); against
# the plain built-in: judge -0.072, GE2E -0.038, CAM++ +0.038.
MOVE_SHARES: tuple[float, ...] = (0.25, 0.5, 0.75)


@dataclass(frozen=True)
class MovedVoice:
    """A built-in voice moved toward the reference: what the voice speaks as."""

    started_from: str  # the built-in the stock check heard closest
    clone_share: float  # share of the instant clone's timbre (0 < share < 1)
    recipe: VoiceRecipe
    style: np.ndarray
    probe: np.ndarray  # the probe sentence in this voice, untoned
    tone: ToneFilter | None  # the reference's recording tone for this voice
    similarity: float  # heard like the stock check (probe with tone, crop-averaged)


def toward_clone(stock: VoiceRecipe, clone: VoiceRecipe, share: float) -> VoiceRecipe:
    """``stock``'s timbre moved ``share`` of the way to ``clone``'s, with the
    clone's prosody half (calibrated to the reference's pitch)."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"share must be strictly between 0 and 1, got {share}")
    keep = 1.0 - share
    weights = keep * stock.timbre_weights + share * clone.timbre_weights
    coeffs = keep * stock.timbre_coeffs + share * clone.timbre_coeffs
    return VoiceRecipe(weights.astype(np.float32), coeffs.astype(np.float32), clone.prosody_weights)


def moved_voices(
    started_from: str,
    stock: VoiceRecipe,
    clone: VoiceRecipe,
    *,
    pack: Callable[[VoiceRecipe], np.ndarray],
    render: Callable[[np.ndarray], np.ndarray],
    tone_for: Callable[[np.ndarray], ToneFilter | None],
    hear: Callable[[np.ndarray, ToneFilter | None], float],
    shares: Sequence[float] = MOVE_SHARES,
) -> list[MovedVoice]:
    """Every share's blend, spoken (``render`` of its ``pack``), toned
    (``tone_for`` its probe) and heard (``hear``: similarity to the reference)."""
    moved = []
    for share in shares:
        recipe = toward_clone(stock, clone, share)
        style = pack(recipe)
        probe = render(style)
        tone = tone_for(probe)
        similarity = hear(probe, tone)
        moved.append(MovedVoice(started_from, float(share), recipe, style, probe, tone, similarity))
    return moved


def closest_moved(moved: Sequence[MovedVoice]) -> MovedVoice:
    """The blend heard closest to the reference (the first on a tie)."""
    if not moved:
        raise ValueError("no moved voice to choose from")
    return max(moved, key=lambda m: m.similarity)
