"""The instant pick's objective (synth/voice/pick.py) and the speaking-rate cue (no models)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from voxclone.synth.audio.tone import GRID_HZ
from voxclone.synth.voice.atlas import VoiceAtlas
from voxclone.synth.voice.clone import InstantCloner
from voxclone.synth.voice.pick import (
    AtlasCues,
    PickWeights,
    ReferenceCues,
    cue_distances,
    load_weights,
)
from voxclone.synth.voice.pipeline import VoicePrint, pool_prints
from voxclone.synth.voice.prosody import PitchStats, speaking_rate
from voxclone.synth.voice.style_space import build_basis

N = 6


def _atlas() -> VoiceAtlas:
    rng = np.random.default_rng(1)
    base = rng.standard_normal((510, 1, 256)).astype(np.float32) * 0.1
    packs = {
        f"p{i}": base + rng.standard_normal((1, 1, 256)).astype(np.float32) * 0.3 for i in range(5)
    }
    basis = build_basis(packs, seed=0)
    # Voices 0 and 1 nearly equally close to the query (unit vector e0); 2..5 far.
    embeddings = np.eye(N, 256, dtype=np.float32)
    embeddings[1] = 0.0
    embeddings[1, 0], embeddings[1, 1] = 0.98, 0.2
    eye = np.eye(5, dtype=np.float32)
    return VoiceAtlas(
        basis,
        timbre_weights=np.concatenate([eye, eye[:1]]),
        timbre_coeffs=np.zeros((N, basis.n_directions), np.float32),
        prosody_weights=np.concatenate([eye, eye[:1]]),
        embeddings=embeddings,
        f0_median=np.full(N, 200.0, np.float32),
        wer=np.zeros(N, np.float32),
    )


def _cues(rate_of_1: float = 5.0) -> AtlasCues:
    spectrum = np.zeros((N, GRID_HZ.size), np.float32)
    spectrum[0, GRID_HZ > 1000] = 8.0  # voice 0: much brighter than the reference
    rate = np.full(N, 5.0, np.float32)
    rate[1] = rate_of_1
    return AtlasCues(
        f0_low=np.full(N, 150.0, np.float32),
        f0_high=np.full(N, 260.0, np.float32),
        spectrum=spectrum,
        rate=rate,
    )


REFERENCE = ReferenceCues(PitchStats(200.0, 150.0, 260.0, 0.5), np.zeros(GRID_HZ.size), 5.0)
QUERY = np.eye(1, 256, dtype=np.float32)[0]


def test_without_cue_weights_the_pick_is_the_nearest_voice() -> None:
    atlas: Any = _atlas()
    cloner = InstantCloner(atlas, encoder=None, cues=_cues())  # type: ignore[arg-type]
    assert cloner.pick(QUERY, REFERENCE, 1)[0].index == 0
    assert cloner.clone_from(QUERY, REFERENCE.pitch).neighbours[0].index == 0


def test_spectrum_cue_moves_the_pick_to_the_voice_with_the_reference_spectrum() -> None:
    atlas: Any = _atlas()
    weights = PickWeights(spectrum=0.1, builtin_margin=0.0)
    cloner = InstantCloner(atlas, None, pick=weights, cues=_cues())  # type: ignore[arg-type]
    picked = cloner.clone_from(QUERY, REFERENCE.pitch, spectrum=REFERENCE.spectrum, rate=5.0)
    assert picked.neighbours[0].index == 1
    # The reported similarity stays the true cosine.
    assert picked.neighbours[0].similarity == pytest.approx(float(atlas.embeddings[1] @ QUERY))
    # Unknown reference spectrum: the cue is neutral, the nearest voice wins again.
    assert cloner.clone_from(QUERY, REFERENCE.pitch).neighbours[0].index == 0


def test_rate_cue_penalizes_a_voice_that_speaks_at_another_pace() -> None:
    atlas: Any = _atlas()
    cues = _cues(rate_of_1=10.0)  # voice 1: twice the reference's rate
    d = cue_distances(np.array([0, 1]), atlas.f0_median, cues, REFERENCE)
    assert d["rate"][0] == 0.0 and d["rate"][1] == pytest.approx(1.0)
    assert d["spectrum"][0] > 0.3 and d["spectrum"][1] == 0.0
    assert np.all(d["f0"] == 0.0) and np.all(d["range"] == 0.0)
    weights = PickWeights(spectrum=0.1, rate=0.2, builtin_margin=0.0)
    cloner = InstantCloner(atlas, None, pick=weights, cues=cues)  # type: ignore[arg-type]
    assert cloner.pick(QUERY, REFERENCE, 1)[0].index == 0


def test_a_cue_table_for_another_atlas_is_refused() -> None:
    cues = _cues()
    short = AtlasCues(cues.f0_low[:3], cues.f0_high[:3], cues.spectrum[:3], cues.rate[:3])
    with pytest.raises(ValueError):
        InstantCloner(_atlas(), None, cues=short)  # type: ignore[arg-type]


def test_shipped_weights_load() -> None:
    weights = load_weights()
    assert weights.pool >= 1 and weights.builtin_margin >= 0.0
    shipped = AtlasCues.load()
    if weights.uses_cues:  # cue weights are useless without the atlas side of the cues
        assert shipped is not None and len(shipped) > 0


def _syllables(rate_hz: float, seconds: float = 4.0, sr: int = 16_000) -> np.ndarray:
    rng = np.random.default_rng(3)
    t = np.arange(int(seconds * sr)) / sr
    # Syllables dip about 16 dB between nuclei (within a phrase, never silent).
    envelope = 0.15 + 0.85 * (0.5 - 0.5 * np.cos(2 * np.pi * rate_hz * t))
    carrier = np.sin(2 * np.pi * 700 * t) + 0.5 * np.sin(2 * np.pi * 1400 * t)
    return (envelope * carrier + 1e-4 * rng.standard_normal(t.size)).astype(np.float32)


@pytest.mark.parametrize("rate_hz", [3.0, 5.0, 7.0])
def test_speaking_rate_counts_syllable_like_bursts(rate_hz: float) -> None:
    assert speaking_rate(_syllables(rate_hz), 16_000) == pytest.approx(rate_hz, rel=0.2)


def test_speaking_rate_of_silence_is_unknown() -> None:
    assert speaking_rate(np.zeros(16_000, np.float32), 16_000) == 0.0


def test_pooled_rate_is_weighted_by_speech_seconds_and_skips_unknowns() -> None:
    def vp(seconds: float, rate: float) -> VoicePrint:
        return VoicePrint(
            embedding=QUERY,
            pitch=PitchStats(200.0, 150.0, 260.0, 0.5),
            spectrum=None,
            speech_seconds=seconds,
            clips=1,
            rate=rate,
        )

    assert pool_prints([vp(9.0, 4.0), vp(3.0, 8.0)]).rate == pytest.approx(5.0)
    assert pool_prints([vp(9.0, 0.0), vp(3.0, 8.0)]).rate == pytest.approx(8.0)
