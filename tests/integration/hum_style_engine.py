"""A tiny style engine for plug-in tests: what the style vector says is heard.

Real implementation of the Engine protocol, only small: text enters through
the character tokenizer, a voice is a [ROWS, 1, DIMS] style pack (not
Kokoro's shape, rate or names), and each token is spoken as a harmonic hum
whose pitch is set by the prosody half (log2 F0 linear in its mean, so the
cloner's pitch direction and calibration have something real to find) and
whose harmonic spectrum by the timbre half (what the speaker encoder hears).
It ships six packs and nothing else for cloning: no atlas, no pick tables, no
comparison list; ``EngineBase.cloning`` is its hook.
"""

from __future__ import annotations

import numpy as np
from char_tokenizer import CharTokenizer

from voxclone.errors import InvalidInput
from voxclone.synth.engine.base import (
    EngineBase,
    EngineCapabilities,
    EngineVoice,
    SynthItem,
    Tokenizer,
)

RATE = 16_000
ROWS = 16
DIMS = 16
HALF = DIMS // 2
TOKEN_SECONDS = 0.06
BASE_HZ = 150.0
HARMONICS = 12
# The packs' own pitches (Hz) and sexes: men and women, like a real pack set.
PACK_PITCH = {
    "hum_ada": (210.0, "F"),
    "hum_bea": (240.0, "F"),
    "hum_cyd": (185.0, "F"),
    "hum_dov": (95.0, "M"),
    "hum_eli": (112.0, "M"),
    "hum_fox": (128.0, "M"),
}


def make_packs(seed: int = 7) -> dict[str, np.ndarray]:
    """Random timbre halves; prosody halves whose mean is the pack's log2(F0 / BASE_HZ)."""
    rng = np.random.default_rng(seed)
    packs = {}
    for name, (hz, _) in PACK_PITCH.items():
        timbre = np.broadcast_to(rng.normal(0.0, 1.0, HALF), (ROWS, HALF))
        prosody = np.log2(hz / BASE_HZ) + rng.normal(0.0, 0.02, (ROWS, HALF))
        prosody -= prosody.mean(axis=1, keepdims=True) - np.log2(hz / BASE_HZ)
        packs[name] = np.concatenate([timbre, prosody], axis=1)[:, None, :].astype(np.float32)
    return packs


class HumStyleEngine(EngineBase):
    def __init__(self, name: str) -> None:
        self._name = name
        self._packs = make_packs()
        self._loaded = False

    @property
    def capabilities(self) -> EngineCapabilities:
        return EngineCapabilities(
            engine=self._name,
            model_id=f"{self._name}-hum",
            model_version="1",
            sample_rate=RATE,
            max_tokens=200,
            native_batching=True,
            languages=("en-us",),
            clone_method="style",
            input_kind="text",
            style_shape=(ROWS, 1, DIMS),
        )

    @property
    def ready(self) -> bool:
        return self._loaded

    def load(self) -> None:
        self._loaded = True

    def warmup(self) -> None:
        self.load()

    def tokenizer(self) -> Tokenizer:
        return CharTokenizer()

    def style_packs(self) -> dict[str, np.ndarray]:
        return self._packs

    def builtin_voices(self) -> dict[str, EngineVoice]:
        return {
            name: EngineVoice(
                name,
                f"a hum at {hz:.0f} Hz",
                style=pack,
                language="en-us",
                sex=sex,
                default_for=("en-us",) if name == "hum_ada" else (),
            )
            for (name, pack), (hz, sex) in zip(
                self._packs.items(), PACK_PITCH.values(), strict=True
            )
        }

    def synthesize(self, batch: list[SynthItem], *, exclusive: bool = False) -> list[np.ndarray]:
        return [self._hum(item) for item in batch]

    def _hum(self, item: SynthItem) -> np.ndarray:
        if item.style is None:
            raise InvalidInput("not a voice of this engine", field="voice")
        style = np.asarray(item.style, np.float32).reshape(-1, DIMS)
        row = style[min(max(len(item.token_ids), 1), style.shape[0]) - 1]
        timbre, prosody = row[:HALF].astype(np.float64), row[HALF:].astype(np.float64)
        f0 = BASE_HZ * 2.0 ** float(prosody.mean())
        # Harmonic h's level follows the timbre half (cycled), on a falling tilt.
        levels = np.array(
            [np.exp(0.6 * np.tanh(timbre[h % HALF])) / h for h in range(1, HARMONICS + 1)]
        )
        n = int(TOKEN_SECONDS * RATE)
        t = np.arange(n * len(item.token_ids)) / RATE
        phase = 2 * np.pi * f0 * t
        wave = sum(level * np.sin((h + 1) * phase) for h, level in enumerate(levels))
        # Each token is a syllable: loudness rises and falls over its stretch.
        envelope = 0.6 + 0.4 * np.tile(np.hanning(n), len(item.token_ids))
        loud = np.repeat([0.6 + 0.1 * (tok % 4) for tok in item.token_ids], n)
        audio = 0.25 * envelope * loud * np.asarray(wave) / float(levels.sum())
        return audio.astype(np.float32)
