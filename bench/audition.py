"""Audition: hear the encoder's nearest atlas voices speak, keep the one that
sounds most like the reference.

The instant pick ranks atlas voices by embeddings precomputed from their own
renders, with GE2E alone. The ceiling study (studies/ceiling.py,
docs/studies.md) found selection to be the bottleneck: the best voice a good
listener could choose among the encoder's top 50 scored 0.544 normalized
against the pick's 0.291. This stage renders the probe sentence in each of the
``k`` nearest eligible voices (with the clone's calibrated prosody half and
the reference's recording tone, as the clone would be served), and two
listeners compare each with the reference: GE2E (the product encoder) and
CAM++ (synth/voice/campplus*.py). Each listener's cosines are z-scored over
the candidates and summed, so neither's scale dominates; the top sum wins.

Measured, and not adopted by the service (issue 38). On the ceiling study's
renders (studies/listener_audition.py; 8 fit + validation speakers) the top
10 heard by both listeners looked like +0.175 normalized over the pick, but
that replay lets the judge score the very render the listener chose, so the
render's own luck counts twice. Spoken by the product and judged on other
sentences (``bench/clone_eval.py --audition --no-stock-check --split
fit,validation``, 13 speakers, against the same run without it): +0.018
normalized with no stock check, +0.021 with it (leave one speaker out,
studies/stock_preference.py: +0.071 vs +0.050); 8 speakers better, 5 worse
(vctk-p228 -0.29). A gain inside the split-to-split noise, for ~10 extra
renders per enrollment (35-130 s on the busy 2-core host), so cloning keeps
the encoder's pick. :class:`Auditioner` is a ``VoiceChooser``
(synth/voice/pipeline.py): ``CloningPipeline(chooser=Auditioner(...))`` runs
it inside the product's own pipeline, so what is measured is that pipeline
with one choice added.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import soxr

from voxclone.synth.audio.tone import ToneFilter
from voxclone.synth.voice.clone import InstantCloner
from voxclone.synth.voice.listener import SpeakerListener
from voxclone.synth.voice.pipeline import SpokenVoice, VoicePrint
from voxclone.synth.voice.speaker_encoder import SAMPLE_RATE as ENCODER_RATE
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder, cosine
from voxclone.synth.voice.style_space import VoiceRecipe

# Candidates heard per enrollment: the atlas's nearest eligible voices.
AUDITION_TOP_K = 10


@dataclass(frozen=True)
class HeardCandidate:
    index: int  # in the atlas
    encoder: float  # GE2E cosine to the reference's print
    listener: float  # second listener's cosine to the reference
    score: float  # z-scored sum over the candidates


@dataclass(frozen=True)
class AuditionResult:
    recipe: VoiceRecipe
    style: np.ndarray
    probe: np.ndarray
    tone: ToneFilter | None
    chosen: HeardCandidate
    heard: tuple[HeardCandidate, ...]  # atlas rank order
    seconds: float

    def summary(self) -> dict[str, object]:
        """What the benchmark's rows keep of it."""
        return {
            "candidates": len(self.heard),
            "chosen_rank": 1 + [h.index for h in self.heard].index(self.chosen.index),
            "listener": round(self.chosen.listener, 4),
            "seconds": round(self.seconds, 2),
        }


def _zscores(values: np.ndarray) -> np.ndarray:
    spread = float(values.std())
    return (values - values.mean()) / (spread if spread > 1e-9 else 1.0)


class Auditioner:
    """Chooses among rendered candidates with the product encoder and a second listener."""

    def __init__(
        self, listener: SpeakerListener, encoder: SpeakerEncoder, *, k: int = AUDITION_TOP_K
    ) -> None:
        if k < 2:
            raise ValueError("an audition needs at least two candidates")
        self.listener = listener
        self._encoder = encoder
        self.k = k

    def embed_reference(self, samples16k: np.ndarray) -> np.ndarray:
        """The second listener's embedding of one reference clip (16 kHz)."""
        return self.listener.embed(samples16k, ENCODER_RATE)

    def choose(
        self,
        cloner: InstantCloner,
        voice_print: VoicePrint,
        voice: SpokenVoice,
        *,
        render: Callable[[np.ndarray], np.ndarray],
        tone_for: Callable[[np.ndarray], ToneFilter | None],
        sample_rate: int,
    ) -> AuditionResult | None:
        """The cloner's ``k`` nearest eligible voices, with ``voice``'s
        calibrated prosody half, heard speaking the probe sentence; None when
        the print has no listener embedding (a stored print, or one made
        without this chooser) or fewer than two candidates pass the gates."""
        if voice_print.listener_embedding is None:
            return None
        matches = cloner.eligible_nearest(
            voice_print.embedding, voice_print.pitch.median_hz, self.k
        )
        if len(matches) < 2:
            return None
        atlas = cloner.atlas
        prosody = voice.recipe.prosody_weights
        candidates = []
        for match in matches:
            recipe = atlas.recipe(match.index).with_prosody(prosody)
            candidates.append((match.index, recipe, atlas.basis.pack(recipe)))
        return self.hear(
            candidates,
            render=render,
            tone_for=tone_for,
            sample_rate=sample_rate,
            reference_embedding=voice_print.embedding,
            reference_listener=voice_print.listener_embedding,
        )

    def hear(
        self,
        candidates: list[tuple[int, VoiceRecipe, np.ndarray]],
        *,
        render: Callable[[np.ndarray], np.ndarray],
        tone_for: Callable[[np.ndarray], ToneFilter | None],
        sample_rate: int,
        reference_embedding: np.ndarray,
        reference_listener: np.ndarray,
    ) -> AuditionResult:
        """``candidates``: (atlas index, recipe, style pack) in atlas rank order;
        ``render`` speaks the probe sentence with a pack, ``tone_for`` gives a
        probe the reference's recording tone."""
        began = time.perf_counter()
        probes: list[np.ndarray] = []
        tones: list[ToneFilter | None] = []
        encoder_sims: list[float] = []
        listener_sims: list[float] = []
        for _, _, style in candidates:
            probe = render(style)
            tone = tone_for(probe)
            heard = probe if tone is None else tone.apply(probe, sample_rate)
            heard16 = soxr.resample(heard, sample_rate, ENCODER_RATE).astype(np.float32)
            encoder_sims.append(cosine(self._encoder.embed(heard16), reference_embedding))
            listener_sims.append(
                self.listener.similarity(
                    self.listener.embed(heard16, ENCODER_RATE), reference_listener
                )
            )
            probes.append(probe)
            tones.append(tone)
        scores = _zscores(np.array(encoder_sims)) + _zscores(np.array(listener_sims))
        heard_all = tuple(
            HeardCandidate(index, e, li, float(s))
            for (index, _, _), e, li, s in zip(
                candidates, encoder_sims, listener_sims, scores, strict=True
            )
        )
        best = int(np.argmax(scores))
        _, recipe, style = candidates[best]
        return AuditionResult(
            recipe,
            style,
            probes[best],
            tones[best],
            heard_all[best],
            heard_all,
            time.perf_counter() - began,
        )
