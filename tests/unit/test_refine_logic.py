"""StyleRefiner's decisions (audition, winner's-curse margin, ASR guard, cancel,
progress) with test doubles for the expensive parts: the "synthesizer" writes
a recipe's first timbre coefficient into the audio and the "encoder" reads it
back, so similarity is an exact function of the recipe. The real models run in
tests/integration/test_voice_service.py."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import FakeClock

from voxclone.errors import Cancelled
from voxclone.synth.voice.atlas import VoiceAtlas
from voxclone.synth.voice.clone import RefineConfig, RefineProgress, StyleRefiner
from voxclone.synth.voice.style_space import VoiceRecipe, build_basis

N_PACKS, N_DIRS = 2, 3


class CoefficientEncoder:
    """2-d 'embedding' [1, c] of a clip whose samples all equal c (then normalized)."""

    def embed_many(self, clips16: list[np.ndarray]) -> np.ndarray:
        value = float(np.mean([np.median(c) for c in clips16]))
        vector = np.array([1.0, value])
        return vector / np.linalg.norm(vector)


def target_for(value: float) -> np.ndarray:
    vector = np.array([1.0, value])
    return vector / np.linalg.norm(vector)


@pytest.fixture()
def atlas() -> VoiceAtlas:
    rng = np.random.default_rng(0)
    packs = {f"p{i}": rng.standard_normal((510, 1, 256)).astype(np.float32) for i in range(2)}
    basis = build_basis(packs, n_random=N_DIRS - 1, n_principal=1)
    n = 3
    return VoiceAtlas(
        basis,
        timbre_weights=np.full((n, N_PACKS), 0.5, np.float32),
        timbre_coeffs=np.zeros((n, N_DIRS), np.float32),
        prosody_weights=np.full((n, N_PACKS), 0.5, np.float32),
        embeddings=np.eye(n, 256, dtype=np.float32),
        f0_median=np.full(n, 120.0, np.float32),
        wer=np.zeros(n, np.float32),
    )


def recipe(value: float) -> VoiceRecipe:
    coeffs = np.zeros(N_DIRS, np.float32)
    coeffs[0] = value
    half = np.full(N_PACKS, 0.5, np.float32)
    return VoiceRecipe(half, coeffs, half)


def make_refiner(
    atlas: VoiceAtlas,
    config: RefineConfig,
    *,
    wer_by_value: dict[float, float] | None = None,
    extra_voices: dict[float, VoiceRecipe] | None = None,
) -> StyleRefiner:
    """``extra_voices``: more recipes the fake synthesizer knows, by the value they sound as."""
    packs_to_value: dict[bytes, float] = {}

    def remember(value: float, voice: VoiceRecipe | None = None) -> None:
        packs_to_value[atlas.basis.pack(voice or recipe(value)).tobytes()] = value

    for v in (0.0, 0.3, 0.31, 0.5, 0.9, 1.0):
        remember(v)
    for v, voice in (extra_voices or {}).items():
        remember(v, voice)

    def synth(tokens: tuple[int, ...], pack: np.ndarray) -> np.ndarray:
        value = packs_to_value.get(pack.tobytes(), -5.0)  # unknown (search) voices score badly
        return np.full(2400, value, np.float32)

    def transcribe(audio: np.ndarray, rate: int) -> str:
        value = round(float(np.median(audio)), 2)
        return "bad" if (wer_by_value or {}).get(value, 0.0) > 0.5 else "hello"

    return StyleRefiner(
        atlas,
        CoefficientEncoder(),  # type: ignore[arg-type]
        synth,
        [(1, 2, 3)],
        ["hello"],
        transcribe=transcribe,
        word_error_rate=lambda ref, hyp: 0.0 if ref == hyp else 1.0,
        config=config,
        clock=FakeClock(0.0, step=0.01),
    )


AUDITION_ONLY = RefineConfig(budget_s=100.0, auditions=8, search=False)


def test_audition_keeps_the_closest_voice(atlas: VoiceAtlas) -> None:
    refiner = make_refiner(atlas, AUDITION_ONLY)
    result = refiner.refine(
        target_for(1.0), recipe(0.0), alternatives=[recipe(0.3), recipe(0.9), recipe(0.5)]
    )
    assert result.improved
    assert float(result.recipe.timbre_coeffs[0]) == pytest.approx(0.9)
    assert result.similarity > result.start_similarity
    assert result.evaluations == 4


def test_a_gain_inside_the_margin_keeps_the_start_voice(atlas: VoiceAtlas) -> None:
    refiner = make_refiner(atlas, AUDITION_ONLY)
    target = target_for(0.3)
    start_sim = float(CoefficientEncoder().embed_many([np.full(10, 0.3)]) @ target)
    assert start_sim == pytest.approx(1.0)
    # 0.31 is a hair closer to a 0.31 target than 0.3, far less than min_gain.
    result = refiner.refine(target_for(0.31), recipe(0.3), alternatives=[recipe(0.31)])
    assert not result.improved
    assert "no candidate beat the start voice" in result.notes[0]
    assert np.array_equal(result.style, atlas.basis.pack(recipe(0.3)))


def test_asr_guard_rejects_a_closer_but_garbled_voice(atlas: VoiceAtlas) -> None:
    refiner = make_refiner(atlas, AUDITION_ONLY, wer_by_value={0.9: 1.0})
    result = refiner.refine(target_for(1.0), recipe(0.0), alternatives=[recipe(0.9), recipe(0.5)])
    assert any("ASR guard" in note for note in result.notes)
    assert float(result.recipe.timbre_coeffs[0]) == pytest.approx(0.5)
    assert result.wer == 0.0


def test_search_never_returns_worse_than_the_start(atlas: VoiceAtlas) -> None:
    config = RefineConfig(budget_s=2.0, auditions=0, search=True, population=4, elite=2)
    result = make_refiner(atlas, config).refine(target_for(0.5), recipe(0.5))
    assert not result.improved
    assert result.evaluations > 1  # it did search


def test_progress_is_reported_up_to_done(atlas: VoiceAtlas) -> None:
    seen: list[RefineProgress] = []
    make_refiner(atlas, AUDITION_ONLY).refine(
        target_for(1.0), recipe(0.0), alternatives=[recipe(0.9)], on_progress=seen.append
    )
    fractions = [p.fraction for p in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert all(0.0 <= f <= 1.0 for f in fractions)


def test_cancel_stops_the_refinement(atlas: VoiceAtlas) -> None:
    with pytest.raises(Cancelled):
        make_refiner(atlas, AUDITION_ONLY).refine(
            target_for(1.0),
            recipe(0.0),
            alternatives=[recipe(0.9)],
            should_cancel=lambda: True,
        )


def test_prosody_auditions_try_other_intonations_on_the_best_timbre(atlas: VoiceAtlas) -> None:
    own = np.full(N_PACKS, 0.5, np.float32)  # every test recipe's prosody half
    other = np.array([0.2, 0.8], np.float32)
    livelier = recipe(0.3).with_prosody(other)
    config = RefineConfig(budget_s=100.0, auditions=8, prosody_auditions=1, search=False)
    refiner = make_refiner(atlas, config, extra_voices={0.95: livelier})
    result = refiner.refine(
        target_for(1.0), recipe(0.0), alternatives=[recipe(0.3)], prosodies=[own, other]
    )
    # The timbre's own prosody is skipped (already heard), the other one wins.
    assert result.improved
    assert np.allclose(result.recipe.prosody_weights, other)
    assert float(result.recipe.timbre_coeffs[0]) == pytest.approx(0.3)
    assert result.evaluations == 3
    # Without prosody auditions the best timbre keeps its prosody.
    plain = make_refiner(atlas, AUDITION_ONLY, extra_voices={0.95: livelier})
    kept = plain.refine(
        target_for(1.0), recipe(0.0), alternatives=[recipe(0.3)], prosodies=[own, other]
    )
    assert np.allclose(kept.recipe.prosody_weights, own)
