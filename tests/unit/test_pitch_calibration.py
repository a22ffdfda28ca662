"""Pitch calibration of a clone (synth/voice/pitch_calibration.py) with a fake
synthesizer: the probe is a harmonic sound whose F0 follows the pack's prosody
half, steeper than the atlas says (as low voices are in Kokoro), so one
step along the atlas's direction falls short and the secant step must fix it.
The real engine runs in tests/integration/test_voice_service.py."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from voxclone.synth.voice.atlas import VoiceAtlas
from voxclone.synth.voice.pitch_calibration import PitchCalibrator
from voxclone.synth.voice.style_space import VoiceRecipe, build_basis

RATE = 24_000
ATLAS_OCTAVES_PER_UNIT = 1.0  # what the atlas's stored F0s say
TRUE_OCTAVES_PER_UNIT = 1.6  # what the fake synthesizer does
BASE_HZ = 100.0


@pytest.fixture()
def atlas() -> VoiceAtlas:
    """Two packs whose prosody halves are 0 and 1, so a pack's prosody value
    is the second pack's share of the prosody blend."""
    rng = np.random.default_rng(0)
    packs = {f"p{i}": rng.standard_normal((510, 1, 256)).astype(np.float32) for i in range(2)}
    packs["p0"][..., 128:] = 0.0
    packs["p1"][..., 128:] = 1.0
    basis = build_basis(packs, n_random=1, n_principal=1)
    share = np.linspace(0.0, 1.0, 6, dtype=np.float32)
    n = share.size
    return VoiceAtlas(
        basis,
        timbre_weights=np.full((n, 2), 0.5, np.float32),
        timbre_coeffs=np.zeros((n, basis.n_directions), np.float32),
        prosody_weights=np.stack([1.0 - share, share], axis=1),
        embeddings=np.eye(n, 256, dtype=np.float32),
        f0_median=(BASE_HZ * 2.0 ** (ATLAS_OCTAVES_PER_UNIT * share)).astype(np.float32),
        wer=np.zeros(n, np.float32),
    )


def recipe(share: float) -> VoiceRecipe:
    half = np.full(2, 0.5, np.float32)
    return VoiceRecipe(half, np.zeros(2, np.float32), np.array([1 - share, share], np.float32))


def _linear(value: float) -> float:
    return TRUE_OCTAVES_PER_UNIT * value


class FakeProbe:
    """Speaks at BASE_HZ raised by ``octaves(prosody value)``."""

    def __init__(
        self,
        voice: Callable[[float, float, int], np.ndarray],
        octaves: Callable[[float], float] = _linear,
    ) -> None:
        self._voice = voice
        self._octaves = octaves
        self.calls = 0

    def __call__(self, pack: np.ndarray) -> np.ndarray:
        self.calls += 1
        f0 = BASE_HZ * 2.0 ** self._octaves(float(pack[0, 0, 128]))
        return self._voice(f0, 1.5, RATE).astype(np.float32)


def semitones(a: float, b: float) -> float:
    return abs(12.0 * float(np.log2(a / b)))


def test_the_atlas_direction_raises_the_fitted_pitch_by_one_octave(atlas: VoiceAtlas) -> None:
    direction = atlas.pitch_direction()
    assert direction.sum() == pytest.approx(0.0, abs=1e-9)
    # Raising the second pack's share by 1 is one octave in the stored F0s.
    assert direction == pytest.approx([-1.0, 1.0], abs=1e-4)


def test_calibration_reaches_the_target_pitch_despite_a_wrong_slope(
    atlas: VoiceAtlas, harmonic_voice: Callable[..., np.ndarray]
) -> None:
    probe = FakeProbe(harmonic_voice)
    calibrator = PitchCalibrator(atlas, probe, RATE)
    start = recipe(0.2)  # sounds at 100 * 2**0.32 ≈ 125 Hz
    target = 180.0
    result = calibrator.calibrate(start, target)
    assert semitones(result.measured_hz, target) < 0.5
    assert result.syntheses == probe.calls == 3  # start, atlas step, secant step
    # The returned probe is the returned voice's: no render is wasted on it.
    assert semitones(calibrator.measure(result.probe), result.measured_hz) < 1e-6
    assert result.recipe.timbre_weights is start.timbre_weights  # only the prosody half moves
    assert result.recipe.prosody_weights.sum() == pytest.approx(1.0, abs=1e-5)
    assert result.shift_octaves > 0


def test_an_overshooting_secant_step_is_followed_by_one_between_the_renders(
    atlas: VoiceAtlas, harmonic_voice: Callable[..., np.ndarray]
) -> None:
    # Flat, then steep: from ~113 Hz the atlas step overshoots (~176 Hz), the
    # secant learns the steep slope and falls short (~136 Hz, -1.6 semitones);
    # the target lies between those two renders.
    probe = FakeProbe(harmonic_voice, lambda v: 0.6 * min(v, 0.5) + 2.5 * max(v - 0.5, 0.0))
    target = 150.0
    result = PitchCalibrator(atlas, probe, RATE).calibrate(recipe(0.3), target)
    assert probe.calls == result.syntheses == 4
    assert semitones(result.measured_hz, target) < 0.5


def test_a_voice_already_at_the_target_costs_one_render(
    atlas: VoiceAtlas, harmonic_voice: Callable[..., np.ndarray]
) -> None:
    probe = FakeProbe(harmonic_voice)
    start = recipe(0.5)
    heard = BASE_HZ * 2.0 ** (TRUE_OCTAVES_PER_UNIT * 0.5)
    result = PitchCalibrator(atlas, probe, RATE).calibrate(start, heard * 1.01)
    assert probe.calls == 1 and result.recipe is start and result.shift_octaves == 0.0


def test_unknown_reference_pitch_leaves_the_voice_alone(
    atlas: VoiceAtlas, harmonic_voice: Callable[..., np.ndarray]
) -> None:
    probe = FakeProbe(harmonic_voice)
    start = recipe(0.3)
    result = PitchCalibrator(atlas, probe, RATE).calibrate(start, 0.0)
    assert result.recipe is start and probe.calls == 1


def test_the_shift_is_capped_so_speech_is_not_extrapolated_too_far(
    atlas: VoiceAtlas, harmonic_voice: Callable[..., np.ndarray]
) -> None:
    probe = FakeProbe(harmonic_voice)
    start = recipe(0.0)  # 100 Hz, asked for 400 Hz: two octaves
    result = PitchCalibrator(atlas, probe, RATE, max_shift_octaves=0.25).calibrate(start, 400.0)
    assert result.shift_octaves == pytest.approx(0.25)
    # The best render within the cap is kept; the cap is not exceeded by a secant step.
    assert result.measured_hz > BASE_HZ * 1.2
    assert probe.calls == 2
