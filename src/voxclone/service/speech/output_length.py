"""How long a request's audio will be, the cap on it, and the guard that holds a render to it.

Every route that makes audio (``/v1/tts``, OpenAI speech, captions, Wyoming,
speech jobs, the library) is priced by :class:`~voxclone.service.speech.pricing.SpeechPricer`,
which estimates the audio's length here from the text *as it will be spoken*
(after the caller's lexicon, SSML ``<sub>``/``<phoneme>``/``<say-as>`` and
number expansion: its spoken units), at the pace each part is spoken at (the
request's speed times ``<prosody rate>``, clamped as the planner clamps it,
times a clone's own pace), plus the silence its ``<break>`` tags ask for. Over
``Settings.max_output_s`` is a 413 before any render. Before this, only SSML
was held to the cap, counted in raw characters at the request's speed: one
lexicon word with a 200-character respelling (16.8 s of speech) repeated
through a 5,969-character job at half speed was accepted and rendered towards
14-17 h of audio.

An estimate is not a measurement, so a speech job keeps its estimate and its
render is held to it (:func:`held_to`): audio past :func:`allowance` of it
stops the job with :class:`OutputOverEstimate` (a clear failure, not a
multi-gigabyte file).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from voxclone.errors import PayloadTooLarge
from voxclone.synth.controls import SPEED_RANGE
from voxclone.synth.text.ssml import SPOKEN_CHARS_PER_S

# A render may run this much longer than its estimate before it is stopped,
# plus OUTGROW_FLOOR_S (short texts: one long pause is a large share). The
# estimate speaks SPOKEN_CHARS_PER_S (15) units a second, which leans long for
# prose (Kokoro: 16-17 a second of Harvard sentences); IPA and respellings
# run slower: a 200-character respelling spoke 16.8 s (11.9 a second, 1.26x
# the estimate; issue #45's probe).
OUTGROW_FACTOR = 1.5
OUTGROW_FLOOR_S = 30.0


class OutputOverEstimate(PayloadTooLarge):
    """A render made more audio than it was priced for (its text's
    pronunciation changed, or it speaks far slower than estimated)."""

    code = "output_over_estimate"


def pace(speed: float, rate: float = 1.0, voice_speed: float = 1.0) -> float:
    """The speed a part is spoken at, clamped as the planner clamps it
    (service/speech/plan.py: the request's speed times ``<prosody rate>``,
    then times the voice's own pace)."""
    low, high = SPEED_RANGE
    seg = min(max(speed * rate, low), high)
    if voice_speed == 1.0:
        return seg
    return min(max(seg * voice_speed, low), high)


def speech_seconds(units: int, speed: float) -> float:
    """About how long ``units`` spoken units last at ``speed``."""
    return units / (SPOKEN_CHARS_PER_S * max(speed, 1e-3))


def check_output_s(output_s: float, limit_s: float, *, at_least: bool = False) -> None:
    """PayloadTooLarge (413) when ``output_s`` of audio (``at_least``: a lower
    bound of it) is more than ``limit_s``."""
    if output_s > limit_s:
        about = "at least" if at_least else "about"
        raise PayloadTooLarge(
            f"the text would give {about} {output_s:.0f} s of audio (as spoken: after "
            f"lexicon, SSML and number expansion, at its speed and prosody rate, with "
            f"its breaks); at most {limit_s:.0f} s per request (max_output_s)",
            field="text",
            limit=limit_s,
            value=round(output_s, 1),
        )


def allowance(estimate_s: float, floor_s: float = OUTGROW_FLOOR_S) -> float:
    """The most audio a render estimated at ``estimate_s`` may make."""
    return estimate_s * OUTGROW_FACTOR + floor_s


def held_to(pieces: Iterator[np.ndarray], rate: int, limit_s: float) -> Iterator[np.ndarray]:
    """``pieces`` (audio at ``rate``), stopped with OutputOverEstimate once
    they add up to more than ``limit_s``: before the piece that would cross
    it is passed on, so nothing past the limit is kept."""
    limit = int(limit_s * rate)
    made = 0
    try:
        for piece in pieces:
            made += piece.size
            if made > limit:
                raise OutputOverEstimate(
                    f"the render made more than {limit_s:.0f} s of audio, more than its "
                    "text was estimated to give (it was stopped there)",
                    field="text",
                    limit=round(limit_s, 1),
                    value=round(made / rate, 1),
                )
            yield piece
    finally:
        # The render's own cleanup (its admission, its queued chunks) runs now.
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
