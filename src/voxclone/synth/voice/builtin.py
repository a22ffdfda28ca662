"""Built-in voices: the five shipped Kokoro packs plus blends chosen by WER.

The blends were picked by ``bench/choose_builtins.py`` (Whisper tiny.en
round-trip WER on 8 Harvard sentences; results in
bench/results/builtin_voices.json). The shipped packs are Japanese voices;
blending the clearest female pack with some of the male pack's timbre gave the
most intelligible English of all candidates: the equal blend of the four
female packs scored 1.6 % WER (best single pack jf_gongitsune 5.1 %); for the
male voice 80 % jm_kumo + 20 % jf_gongitsune scored 6.7 % (jm_kumo alone
12.4 %).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BuiltinVoice:
    name: str
    description: str
    sex: str
    recipe: dict[str, float]  # pack name -> weight


BLENDS: tuple[BuiltinVoice, ...] = (
    BuiltinVoice(
        "clear_female",
        "clear English female (equal blend of the four female packs; WER 1.6 %)",
        "F",
        {"jf_gongitsune": 0.25, "jf_nezumi": 0.25, "jf_alpha": 0.25, "jf_tebukuro": 0.25},
    ),
    BuiltinVoice(
        "clear_male",
        "clear English male (80 % jm_kumo, 20 % jf_gongitsune; WER 6.7 % vs 12.4 % pure)",
        "M",
        {"jm_kumo": 0.8, "jf_gongitsune": 0.2},
    ),
)

PACK_SEX = {
    "jf_alpha": "F",
    "jf_gongitsune": "F",
    "jf_nezumi": "F",
    "jf_tebukuro": "F",
    "jm_kumo": "M",
}


def blend_packs(packs: dict[str, np.ndarray], recipe: dict[str, float]) -> np.ndarray:
    total = sum(recipe.values())
    out = np.zeros_like(next(iter(packs.values())), dtype=np.float32)
    for name, weight in recipe.items():
        out += packs[name].astype(np.float32) * (weight / total)
    return out


def builtin_voices(packs: dict[str, np.ndarray]) -> dict[str, tuple[BuiltinVoice, np.ndarray]]:
    """Name -> (description, style pack) for every built-in voice."""
    voices: dict[str, tuple[BuiltinVoice, np.ndarray]] = {}
    for blend in BLENDS:
        voices[blend.name] = (blend, blend_packs(packs, blend.recipe))
    for name, pack in packs.items():
        info = BuiltinVoice(
            name, f"shipped Kokoro pack {name}", PACK_SEX.get(name, "?"), {name: 1.0}
        )
        voices[name] = (info, pack.astype(np.float32))
    return voices
