"""User-facing speaking controls and emotion presets (same ranges on every surface).

An emotion preset is a documented combination of the low-level controls,
scaled by ``intensity``; explicit parameters the user sets override it. The
directions are checked by measurement (tests/integration/test_controls_effects.py
and bench/controls_eval.py → docs/benchmarks.md "Speaking controls").

How each control is realised:

* ``speed`` goes to Kokoro (its own duration control), so rate changes are
  native rather than time-stretched;
* ``pitch`` is a PSOLA shift of the finished waveform (``audio.post.PITCH_METHOD``),
  chosen by measurement against WORLD resynthesis and a shift along the
  prosody half of the style vector (bench/results/controls.json): all three kept
  Whisper WER at 0 on the default voice; the style shift sounded most like the
  voice (resemblyzer 0.878 vs PSOLA 0.849, WORLD 0.811) but missed the requested
  interval by up to 21 % on the default voice and by 60 % on the male voice (the
  same step moves a low voice much further), so it cannot honour a number the
  user asked for; PSOLA was the most accurate (max 13 %) at a fifth of WORLD's cost;
* ``energy``, F0 range and whisper are DSP (``voxclone.synth.audio.post``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from voxclone.errors import InvalidInput

SPEED_RANGE = (0.5, 2.0)
PITCH_RANGE = (-0.5, 0.5)  # octaves
ENERGY_RANGE = (0.8, 1.2)
INTENSITY_RANGE = (0.0, 1.0)
# Above this the model itself becomes unintelligible (speed 2.0: 67–100 % WER
# with Whisper tiny.en); faster requests are rendered at this speed and
# time-compressed with WSOLA (synth/audio/timescale.py). Measured at speed 2.0
# on the benchmark's one-sentence corners (docs/benchmarks.md, "Control
# corners"): 8–42 % WER, worst with pitch −0.5 and energy 1.2 (41.7 %); speed
# 2.0 is usable, not transparent, and a low pitch makes it worse.
# 1.0: Kokoro's own speed is not used at all, WSOLA does every speed change.
# At 1.25 (what the engine did from request 1.5 up) the real rate differs by
# voice (the curve below is clear_female's): speed 2 gave +5.0 % too long on
# af_heart, +4.1 % on bf_emma, -1.9 % on clear_female; WSOLA alone gives
# +1.3 to +1.9 % on the same four voices and Whisper tiny.en WER 7.5 % against
# 10.0 % (bench/speed_curve.py, every built-in voice in bench/results/speed_curve.json).
ENGINE_SPEED_MAX = 1.0
# Kokoro's own speed control is not exact: it rounds each phoneme's duration
# to whole frames, so near 1.0 the audio changes only about half as much as
# asked (engine 0.85 → 0.91×, 1.15 → 1.07× the rate). Measured pairs (engine
# speed, real rate = audible duration at 1.0 / at that speed), clear_female on
# the two-sentence text of studies/speed_accuracy.py.
# Only its measured points are used (see WSOLA_ONLY_BELOW);
# studies/speed_accuracy.py measures the result on both default voices.
ENGINE_RATE_CURVE: tuple[tuple[float, float], ...] = (
    (0.5, 0.4684),
    (0.526, 0.4805),
    (0.6, 0.59),
    (0.7, 0.6837),
    (0.85, 0.9094),
    (1.0, 1.0),
    (1.15, 1.0664),
    (1.25, 1.199),
)


# Between engine 0.5 and 1.25 the measured curve is step-like (0.7 → 0.684,
# 0.85 → 0.909, 1.15 → 1.066) and text-dependent: mapped through it, request
# 0.8 gave 1.098x the ideal length, and on a sentence the curve was not fitted
# on, even the near-linear slow part (engine 0.5-0.7) missed by +2.8 to +3.8 %
# (clear_female, 2026-11-30). WSOLA's duration is exact, so every request below
# 1.5 is rendered at engine 1.0 and time-scaled after synthesis; from 1.5 up
# the engine did the first 1.2x and WSOLA the rest, until that was measured
# per voice (ENGINE_SPEED_MAX above: now 1.0, WSOLA does it all).
WSOLA_ONLY_BELOW = 1.5


def engine_rate(engine_speed: float) -> float:
    """How many times shorter Kokoro's audio gets at ``engine_speed`` (measured curve)."""
    xs, ys = zip(*ENGINE_RATE_CURVE, strict=True)
    return float(np.interp(engine_speed, xs, ys))


@dataclass(frozen=True)
class EmotionPreset:
    """Deltas at intensity 1.0. pitch in octaves, others are multipliers."""

    description: str
    pitch: float = 0.0
    f0_range: float = 1.0  # scale of F0 excursions around the median
    speed: float = 1.0
    energy: float = 1.0
    pause: float = 1.0  # scale of pauses between sentences
    whisper: bool = False


# Preset speeds are real rates (speed is mapped through ENGINE_RATE_CURVE). They
# were tuned when speed went to the engine unmapped, and are now that tuning's
# measured rate, so each preset sounds as it did (happy was engine 1.12 = 1.05×).
EMOTIONS: dict[str, EmotionPreset] = {
    "neutral": EmotionPreset("the voice as enrolled"),
    "happy": EmotionPreset(
        "brighter: higher and livelier pitch, faster, more energy, shorter pauses",
        pitch=0.12,
        f0_range=1.4,
        speed=1.05,
        energy=1.1,
        pause=0.9,
    ),
    "sad": EmotionPreset(
        "lower, flatter pitch, slower, softer, longer pauses",
        pitch=-0.1,
        f0_range=0.6,
        speed=0.83,
        # 0.88 until speeds below 1.5 became WSOLA-only: the stretched reading
        # measures +0.4 LU louder than the model's own slower one, which left
        # "sad" only 0.2 LU softer than neutral; 0.85 restores an audible drop.
        energy=0.85,
        pause=1.35,
    ),
    "angry": EmotionPreset(
        "forceful: much more energy, wider pitch range, faster, short pauses",
        pitch=0.05,
        f0_range=1.35,
        speed=1.05,
        energy=1.2,
        pause=0.8,
    ),
    "surprised": EmotionPreset(
        "high pitch with wide excursions, a little more energy",
        pitch=0.2,
        f0_range=1.6,
        speed=1.01,
        energy=1.08,
    ),
    "calm": EmotionPreset(
        "lower, steady pitch, slower, softer, longer pauses",
        pitch=-0.1,
        f0_range=0.75,
        speed=0.91,
        # 0.92 until speeds below 1.5 became WSOLA-only (see "sad"): calm then
        # measured 0.4 LU louder than neutral; 0.87 keeps it softer.
        energy=0.87,
        pause=1.2,
    ),
    "serious": EmotionPreset(
        "lower, narrower pitch, measured (slower) pace",
        pitch=-0.12,
        f0_range=0.7,
        speed=0.94,
        energy=1.02,
        pause=1.1,
    ),
    "whisper": EmotionPreset(
        "unvoiced breathy speech, softer and slower",
        speed=0.93,
        energy=0.85,
        pause=1.1,
        whisper=True,
    ),
}


def _check(name: str, value: object, bounds: tuple[float, float]) -> float:
    """``value`` as a float inside ``bounds`` (inclusive), else InvalidInput."""
    message = f"{name} must be a number between {bounds[0]} and {bounds[1]}"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput(message, field=name, limit=list(bounds))
    try:
        number = float(value)
    except ValueError:
        raise InvalidInput(message, field=name, limit=list(bounds)) from None
    # NaN fails both comparisons, so it is rejected here too.
    if not (bounds[0] <= number <= bounds[1]):
        raise InvalidInput(message, field=name, limit=list(bounds), value=number)
    return number


@dataclass(frozen=True)
class SpeechControls:
    """What the user asked for. ``None`` means "not set": the preset decides."""

    speed: float | None = None
    pitch: float | None = None
    energy: float | None = None
    emotion: str = "neutral"
    intensity: float = 1.0

    def __post_init__(self) -> None:
        emotion = self.emotion.strip().lower() if isinstance(self.emotion, str) else ""
        if emotion not in EMOTIONS:
            shown = (
                self.emotion[:32] if isinstance(self.emotion, str) else type(self.emotion).__name__
            )
            raise InvalidInput(
                f"unknown emotion '{shown}'; allowed: {', '.join(EMOTIONS)}",
                field="emotion",
                limit=list(EMOTIONS),
            )
        # Frozen dataclass: store the normalised values (also keeps cache keys canonical).
        object.__setattr__(self, "emotion", emotion)
        object.__setattr__(self, "intensity", _check("intensity", self.intensity, INTENSITY_RANGE))
        for name, bounds in (
            ("speed", SPEED_RANGE),
            ("pitch", PITCH_RANGE),
            ("energy", ENERGY_RANGE),
        ):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _check(name, value, bounds))

    def resolve(self) -> ResolvedControls:
        """Blend the preset (scaled by intensity) with explicit overrides."""
        preset = EMOTIONS[self.emotion]
        k = self.intensity

        def lerp(delta: float, neutral: float) -> float:
            return neutral + (delta - neutral) * k

        def clamp(value: float, bounds: tuple[float, float]) -> float:
            return min(max(value, bounds[0]), bounds[1])

        return ResolvedControls(
            speed=self.speed
            if self.speed is not None
            else clamp(lerp(preset.speed, 1.0), SPEED_RANGE),
            pitch=self.pitch
            if self.pitch is not None
            else clamp(lerp(preset.pitch, 0.0), PITCH_RANGE),
            energy=self.energy
            if self.energy is not None
            else clamp(lerp(preset.energy, 1.0), ENERGY_RANGE),
            f0_range=lerp(preset.f0_range, 1.0),
            pause=lerp(preset.pause, 1.0),
            whisper=preset.whisper and k >= 0.5,
        )

    def cache_parts(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class ResolvedControls:
    speed: float = 1.0
    pitch: float = 0.0
    energy: float = 1.0
    f0_range: float = 1.0
    pause: float = 1.0
    whisper: bool = False
    # False for an engine without its own duration control: all of the speed
    # change is then WSOLA time-scaling after synthesis.
    native_speed: bool = True

    @property
    def engine_speed(self) -> float:
        """The speed passed to the model: 1.0 below ``WSOLA_ONLY_BELOW`` (WSOLA's
        duration is exact), else the fastest it speaks clearly, WSOLA doing the
        rest. An engine without native speed renders at 1.0 and WSOLA does it all."""
        if not self.native_speed:
            return 1.0
        return ENGINE_SPEED_MAX if self.speed >= WSOLA_ONLY_BELOW else 1.0

    @property
    def tempo(self) -> float:
        """Extra time compression applied after synthesis (1.0 = none)."""
        return self.speed / engine_rate(self.engine_speed)

    @property
    def needs_dsp(self) -> bool:
        return (
            abs(self.tempo - 1.0) > 1e-3
            or abs(self.pitch) > 1e-3
            or abs(self.energy - 1.0) > 1e-3
            or abs(self.f0_range - 1.0) > 1e-3
            or self.whisper
        )

    def with_speed(self, speed: float) -> ResolvedControls:
        return replace(self, speed=speed)
