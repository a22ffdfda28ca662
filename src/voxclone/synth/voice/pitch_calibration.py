"""Make a clone speak at the reference's median F0, measured on what it says.

The instant clone picks the atlas prosody half whose *stored* F0 fits the
reference, but that F0 was measured with the atlas voice's own timbre, and
the atlas has nothing above ~300 Hz: on the dev speakers the clones came out
up to 4 semitones off (a 331 Hz reference spoken at 263 Hz). So the clone is
synthesized once (the quality report's probe sentence, needed anyway for the
tone match), its median F0 measured, and the prosody half moved along the
atlas's pitch direction by the error; a second, secant step corrects for the
step moving low and high voices by different amounts, and a step that
overshoots is followed by one interpolated between the renders on either side
of the target (at most four renders). The shift stays in the
style vector (no DSP on the output), so it costs nothing at synthesis time.

Measured with the judge on held-out audio in docs/benchmarks.md (Cloning): before and
after, and the ablation that re-pitches a refined voice after its choice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import soxr

from voxclone.synth.voice.atlas import VoiceAtlas
from voxclone.synth.voice.prosody import pitch_stats
from voxclone.synth.voice.style_space import VoiceRecipe

ANALYSIS_RATE = 16_000
# Half a semitone: below what the pitch tracker resolves reliably on one sentence.
TOLERANCE_OCTAVES = 0.5 / 12
# Far extrapolation of the prosody half garbles speech; half an octave kept
# Whisper's WER at 0 in the controls benchmark's style-shift runs.
MAX_SHIFT_OCTAVES = 0.5
# A step that moved F0 by less than this per octave asked is not trusted for a secant.
MIN_SLOPE = 0.2

# Style pack [510, 1, 256] -> probe audio at ``sample_rate``.
ProbeFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class CalibratedVoice:
    recipe: VoiceRecipe
    probe: np.ndarray  # the probe sentence spoken by ``recipe``
    measured_hz: float  # median F0 of ``probe`` (0.0: no voiced frames)
    shift_octaves: float  # how far the prosody half was moved
    syntheses: int  # probe renders spent (1 = already in tolerance)


class PitchCalibrator:
    def __init__(
        self,
        atlas: VoiceAtlas,
        probe: ProbeFn,
        sample_rate: int,
        *,
        max_steps: int = 2,
        tolerance_octaves: float = TOLERANCE_OCTAVES,
        max_shift_octaves: float = MAX_SHIFT_OCTAVES,
    ) -> None:
        self._atlas = atlas
        self._direction = atlas.pitch_direction()
        self._probe = probe
        self._rate = sample_rate
        self._max_steps = max_steps
        self._tolerance = tolerance_octaves
        self._max_shift = max_shift_octaves

    def measure(self, audio: np.ndarray) -> float:
        x16 = soxr.resample(audio, self._rate, ANALYSIS_RATE).astype(np.float32)
        return pitch_stats(x16, ANALYSIS_RATE).median_hz

    def calibrate(self, recipe: VoiceRecipe, target_hz: float) -> CalibratedVoice:
        """``recipe`` with its prosody half moved so the probe's median F0 is ``target_hz``.

        Returns the best of the renders tried (smallest error), so a step that
        overshoots never makes the voice worse than it was.
        """
        base = recipe.prosody_weights.astype(np.float64) / float(recipe.prosody_weights.sum())

        def render(shift: float) -> CalibratedVoice:
            weights = (base + shift * self._direction).astype(np.float32)
            candidate = recipe if shift == 0.0 else recipe.with_prosody(weights)
            audio = self._probe(self._atlas.basis.pack(candidate))
            return CalibratedVoice(candidate, audio, self.measure(audio), shift, 0)

        tried = [render(0.0)]
        if target_hz > 0 and tried[0].measured_hz > 0:
            goal = float(np.log2(target_hz))

            def error(voice: CalibratedVoice) -> float:
                return goal - float(np.log2(voice.measured_hz))

            # The atlas's direction promises one octave per unit; the secant
            # replaces that promise with what the last step really did.
            slope = 1.0
            while len(tried) <= self._max_steps and abs(error(tried[-1])) > self._tolerance:
                last = tried[-1]
                shift = last.shift_octaves + error(last) / slope
                shift = float(np.clip(shift, -self._max_shift, self._max_shift))
                if any(abs(shift - t.shift_octaves) < 1e-6 for t in tried):
                    break  # clipped onto a shift already heard: nothing new to learn
                tried.append(render(shift))
                if tried[-1].measured_hz <= 0:
                    break
                moved = float(np.log2(tried[-1].measured_hz / last.measured_hz))
                slope = moved / (shift - last.shift_octaves)
                if slope < MIN_SLOPE:
                    break  # the step did not move the pitch the way asked
            heard = [t for t in tried if t.measured_hz > 0]
            best = min(heard, key=lambda t: abs(error(t)))
            low = [t for t in heard if error(t) > 0]
            high = [t for t in heard if error(t) < 0]
            if abs(error(best)) > self._tolerance and low and high:
                # The secant overshot: the target lies between two renders, and
                # one step interpolated between the closest of them lands it
                # (female 1088 with the decoder's edge crop: 186 and 200 Hz
                # around 193 Hz, -0.58 semitone left after three renders).
                below = min(low, key=error)
                above = max(high, key=error)
                part = error(below) / (error(below) - error(above))
                shift = below.shift_octaves + part * (above.shift_octaves - below.shift_octaves)
                tried.append(render(shift))
                if tried[-1].measured_hz > 0:
                    best = min((best, tried[-1]), key=lambda t: abs(error(t)))
        else:
            best = tried[0]
        return replace(best, syntheses=len(tried))
