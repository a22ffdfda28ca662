"""Built-in voices: two clear blends plus the five shipped Kokoro packs, by plain names.

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
    description: str  # one line, for a listener: what the voice sounds like
    sex: str
    recipe: dict[str, float]  # pack name -> weight
    # Other names that select this voice: earlier names (stored configs and
    # scripts keep working) and OpenAI's voice names.
    aliases: tuple[str, ...] = ()


# OpenAI's voice names, for unmodified OpenAI clients: their female-sounding
# names speak with clear_female, their male-sounding ones with clear_male.
OPENAI_FEMALE = ("alloy", "ballad", "coral", "fable", "nova", "sage", "shimmer")
OPENAI_MALE = ("ash", "echo", "onyx", "verse")

BLENDS: tuple[BuiltinVoice, ...] = (
    # Equal blend of the four female packs: 1.6 % WER (best single pack 5.1 %).
    BuiltinVoice(
        "clear_female",
        "Clear female voice, easy to follow; the default",
        "F",
        {"jf_gongitsune": 0.25, "jf_nezumi": 0.25, "jf_alpha": 0.25, "jf_tebukuro": 0.25},
        OPENAI_FEMALE,
    ),
    # 80 % jm_kumo + 20 % jf_gongitsune: 6.7 % WER (jm_kumo alone 12.4 %).
    BuiltinVoice(
        "clear_male",
        "Clear male voice, lower and calm",
        "M",
        {"jm_kumo": 0.8, "jf_gongitsune": 0.2},
        OPENAI_MALE,
    ),
)

# The shipped packs under plain names (their pack ids stay as aliases). They
# are Japanese voices: in English they keep an accent, which the descriptions
# say, ordered from clearest to hardest to follow (WER on 8 Harvard sentences:
# gongitsune 5.1 %, nezumi 9.6 %, kumo 12.4 %, tebukuro 23.8 %, alpha 25.1 %).
PACKS: tuple[BuiltinVoice, ...] = (
    BuiltinVoice(
        "yuki",
        "Female voice with a light Japanese accent; the clearest single voice",
        "F",
        {"jf_gongitsune": 1.0},
        ("jf_gongitsune",),
    ),
    BuiltinVoice(
        "mei",
        "Young female voice with a Japanese accent",
        "F",
        {"jf_nezumi": 1.0},
        ("jf_nezumi",),
    ),
    BuiltinVoice(
        "kenji",
        "Male voice with a Japanese accent",
        "M",
        {"jm_kumo": 1.0},
        ("jm_kumo",),
    ),
    BuiltinVoice(
        "aoi",
        "Soft female voice with a strong Japanese accent; best for Japanese text",
        "F",
        {"jf_tebukuro": 1.0},
        ("jf_tebukuro",),
    ),
    BuiltinVoice(
        "hana",
        "Bright female voice with a strong Japanese accent; best for Japanese text",
        "F",
        {"jf_alpha": 1.0},
        ("jf_alpha",),
    ),
)

PACK_SEX = {
    "jf_alpha": "F",
    "jf_gongitsune": "F",
    "jf_nezumi": "F",
    "jf_tebukuro": "F",
    "jm_kumo": "M",
}


def openai_aliases() -> dict[str, str]:
    """OpenAI voice name -> the built-in voice it speaks with."""
    return {
        alias: v.name for v in BLENDS for alias in v.aliases if alias in OPENAI_FEMALE + OPENAI_MALE
    }


def legacy_aliases() -> dict[str, str]:
    """Earlier built-in name (a pack id) -> its plain name today."""
    return {alias: v.name for v in BLENDS + PACKS for alias in v.aliases if alias in PACK_SEX}


def blend_packs(packs: dict[str, np.ndarray], recipe: dict[str, float]) -> np.ndarray:
    total = sum(recipe.values())
    out = np.zeros_like(next(iter(packs.values())), dtype=np.float32)
    for name, weight in recipe.items():
        out += packs[name].astype(np.float32) * (weight / total)
    return out


def builtin_voices(packs: dict[str, np.ndarray]) -> dict[str, tuple[BuiltinVoice, np.ndarray]]:
    """Name -> (description, style pack) for every built-in voice.

    Blends first (the default and clearest), then the shipped packs under their
    plain names; a pack the installed model lacks is skipped, and a pack not
    named in :data:`PACKS` keeps its id.
    """
    voices: dict[str, tuple[BuiltinVoice, np.ndarray]] = {}
    for blend in BLENDS:
        voices[blend.name] = (blend, blend_packs(packs, blend.recipe))
    known = set()
    for info in PACKS:
        (pack_id,) = info.recipe
        known.add(pack_id)
        if pack_id in packs:
            voices[info.name] = (info, packs[pack_id].astype(np.float32))
    for name, pack in packs.items():
        if name not in known:
            info = BuiltinVoice(name, f"voice {name}", PACK_SEX.get(name, "?"), {name: 1.0})
            voices[name] = (info, pack.astype(np.float32))
    return voices
