"""The benchmark's audition (bench/audition.py) on synthetic voices: which
candidate it keeps, and that the pipeline serves what its chooser hook keeps
(no models)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_style_space import _atlas, fake_packs

from voxclone.synth.voice.clone import InstantCloner
from voxclone.synth.voice.pipeline import CloningPipeline, VoicePrint, pool_prints
from voxclone.synth.voice.prosody import PitchStats
from voxclone.synth.voice.style_space import VoiceRecipe

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from audition import Auditioner, AuditionResult  # noqa: E402


def _direction(angle: float, dims: int) -> np.ndarray:
    v = np.zeros(dims, np.float32)
    v[0], v[1] = np.cos(angle), np.sin(angle)
    return v


class _HearsLevel:
    """A listener that hears a probe's constant level as an angle: renders at
    nearby levels sound alike."""

    def __init__(self, name: str, dims: int, gain: float) -> None:
        self.name, self.dims, self._gain = name, dims, gain

    def embed(self, audio: np.ndarray, sample_rate: int = 16_000) -> np.ndarray:
        return _direction(self._gain * float(np.median(audio)), self.dims)

    def similarity(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(a @ b)


def _candidates(levels: list[float]) -> list[tuple[int, VoiceRecipe, np.ndarray]]:
    recipe = VoiceRecipe(np.ones(1, np.float32), np.zeros(0, np.float32), np.ones(1, np.float32))
    return [
        (10 + i, recipe, np.full((2, 1, 4), level, np.float32)) for i, level in enumerate(levels)
    ]


def _choose(auditioner: Auditioner, levels: list[float], encoder_ref: float, listener_ref: float):
    return auditioner.hear(
        _candidates(levels),
        render=lambda pack: np.full(2_400, float(pack.flat[0]), np.float32),
        tone_for=lambda probe: None,
        sample_rate=16_000,
        reference_embedding=_direction(encoder_ref, 256),
        reference_listener=_direction(listener_ref, 192),
    )


def test_the_candidate_both_listeners_hear_closest_is_kept() -> None:
    encoder = _HearsLevel("ge2e", 256, 1.0)
    auditioner = Auditioner(_HearsLevel("campplus", 192, 1.0), encoder)  # type: ignore[arg-type]
    result = _choose(auditioner, [0.1, 0.5, 0.9, 1.3], encoder_ref=0.9, listener_ref=0.9)
    assert result.chosen.index == 12
    assert [h.index for h in result.heard] == [10, 11, 12, 13]  # rank order kept
    assert float(result.probe[0]) == pytest.approx(0.9)
    assert result.summary()["chosen_rank"] == 3 and result.summary()["candidates"] == 4


def test_listeners_that_disagree_are_weighed_by_how_far_each_stands_out() -> None:
    """GE2E hears 0.50 and 0.55 almost alike (it prefers 0.50 by a hair); the
    second listener hears 0.55 far closer: z-scored, the clear preference wins
    over the hair. Neither listener alone would make this choice."""
    encoder = _HearsLevel("ge2e", 256, 1.0)
    auditioner = Auditioner(_HearsLevel("campplus", 192, 20.0), encoder)  # type: ignore[arg-type]
    result = _choose(auditioner, [0.0, 0.50, 0.55, 2.0], encoder_ref=0.50, listener_ref=11.0)
    by_index = {h.index: h for h in result.heard}
    assert by_index[11].encoder > by_index[12].encoder  # GE2E alone: candidate 11
    assert result.chosen.index == 12


def test_an_audition_needs_two_candidates() -> None:
    with pytest.raises(ValueError):
        Auditioner(_HearsLevel("campplus", 192, 1.0), None, k=1)  # type: ignore[arg-type]


def _print(listener: np.ndarray | None, seconds: float, embedding_angle: float) -> VoicePrint:
    return VoicePrint(
        embedding=_direction(embedding_angle, 256),
        pitch=PitchStats(0.0, 0.0, 0.0, 0.0),
        spectrum=None,
        speech_seconds=seconds,
        clips=1,
        listener_embedding=listener,
    )


def test_pooled_prints_keep_the_listener_embedding_only_when_every_clip_has_one() -> None:
    a, b = _direction(0.0, 192), _direction(np.pi / 2, 192)
    pooled = pool_prints([_print(a, 3.0, 0.0), _print(b, 1.0, 0.0)])
    assert pooled.listener_embedding is not None
    assert np.linalg.norm(pooled.listener_embedding) == pytest.approx(1.0, abs=1e-5)
    # Weighted by speech seconds: three times as much of the first clip.
    assert pooled.listener_embedding[0] == pytest.approx(3 / np.sqrt(10), abs=1e-5)
    assert pool_prints([_print(a, 3.0, 0.0), _print(None, 1.0, 0.0)]).listener_embedding is None


def _pipeline(auditioner: Auditioner | None) -> tuple[CloningPipeline, Any, dict[int, float]]:
    """Six atlas voices (test_style_space._atlas); each renders at its own level."""
    atlas = _atlas(fake_packs())
    # Voice 5 has voice 0's timbre (test_style_space._atlas), so it sounds the same.
    levels = {i: 0.1 * (i % 5 + 1) for i in range(len(atlas))}
    timbres = {i: atlas.basis.pack(atlas.recipe(i))[:, :, :128] for i in range(5)}

    def probe(pack: np.ndarray) -> np.ndarray:
        # The timbre half says which atlas voice speaks (the prosody half varies).
        voice = next((i for i, t in timbres.items() if np.allclose(pack[:, :, :128], t)), -1)
        return np.full(24_000, levels.get(voice, 0.0), np.float32)

    encoder = _HearsLevel("ge2e", 256, 1.0)
    cloner = InstantCloner(atlas, encoder, top_k=1)  # type: ignore[arg-type]
    return (
        CloningPipeline(
            cloner, probe=probe, sample_rate=24_000, stock_check=False, chooser=auditioner
        ),
        atlas,
        levels,
    )


def test_the_pipeline_serves_the_voice_the_audition_kept() -> None:
    auditioner = Auditioner(
        _HearsLevel("campplus", 192, 1.0),
        _HearsLevel("ge2e", 256, 1.0),  # type: ignore[arg-type]
        k=5,
    )
    pipeline, atlas, levels = _pipeline(auditioner)

    # A reference both listeners hear like atlas voice ``v`` (levels: voice i
    # renders at 0.1 (i + 1)), where ``v`` is among the atlas's nearest to its
    # embedding but not the encoder's pick.
    def lookup(v: int) -> list[int]:
        return [
            m.index for m in pipeline.cloner.eligible_nearest(_direction(levels[v], 256), 0.0, 5)
        ]

    voice = next(v for v in levels if v in lookup(v)[1:] and levels[lookup(v)[0]] != levels[v])
    voice_print = VoicePrint(
        embedding=_direction(levels[voice], 256),
        pitch=PitchStats(0.0, 0.0, 0.0, 0.0),
        spectrum=None,
        speech_seconds=5.0,
        clips=1,
        listener_embedding=_direction(levels[voice], 192),
    )
    draft = pipeline.draft(voice_print)
    cloned = pipeline.finish(draft, match_tone=False)
    assert isinstance(cloned.chosen, AuditionResult)
    heard = [h.index for h in cloned.chosen.heard]
    assert heard == [
        m.index for m in pipeline.cloner.eligible_nearest(voice_print.embedding, 0.0, 5)
    ]
    assert heard == lookup(voice)
    chosen = cloned.chosen.chosen.index
    assert levels[chosen] == levels[voice] and chosen in lookup(voice)[1:]
    expected = chosen
    # Served: the kept voice's style with the clone's prosody half, its probe.
    kept = atlas.recipe(expected).with_prosody(draft.instant.recipe.prosody_weights)
    np.testing.assert_allclose(cloned.voice.style, atlas.basis.pack(kept))
    assert cloned.voice.probe is not None
    assert float(cloned.voice.probe[0]) == pytest.approx(levels[expected])
    assert not np.allclose(cloned.voice.style, draft.voice.style)

    # A print without the listener's embedding (a stored print, or one made
    # without the chooser) keeps the encoder's pick.
    plain = pipeline.finish(
        pipeline.draft(
            VoicePrint(
                voice_print.embedding, voice_print.pitch, None, 5.0, 1, listener_embedding=None
            )
        ),
        match_tone=False,
    )
    assert plain.chosen is None
    np.testing.assert_allclose(plain.voice.style, draft.voice.style)
