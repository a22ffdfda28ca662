"""Built-in voices: Kokoro's standard voices by their standard names, plus the
earlier seven (two clear blends and the five shipped packs under plain names).

With Kokoro's other voice packs installed (engine/kokoro/voice_packs.py, ``make
install``), every pack is a built-in voice under its standard name (``af_heart``,
``ef_dora``, ...; standard_voices.py), with each language's measured
default. The earlier plain names keep selecting exactly the same style: ``yuki``
is ``jf_gongitsune``'s pack, ``clear_female`` the same blend as before.

Without those packs (an offline install) the catalog is the earlier seven:

The blends were picked by ``studies/choose_builtins.py`` (Whisper tiny.en
round-trip WER on 8 Harvard sentences; results in
bench/results/builtin_voices.json). The shipped packs are Japanese voices;
blending the clearest female pack with some of the male pack's timbre gave the
most intelligible English of all candidates: the equal blend of the four
female packs scored 1.6 % WER (best single pack jf_gongitsune 5.1 %); for the
male voice 80 % jm_kumo + 20 % jf_gongitsune scored 6.7 % (jm_kumo alone
12.4 %).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from voxclone.synth.engine.base import OPENAI_FEMALE, OPENAI_MALE, ComparisonVoice
from voxclone.synth.engine.kokoro.standard_voices import (
    CHARACTER_VOICES,
    LANGUAGE_DEFAULTS,
    OPENAI_STANDARD,
    catalog_order,
    parse_standard,
)


@dataclass(frozen=True)
class BuiltinVoice:
    name: str
    description: str  # one line, for a listener: what the voice sounds like
    sex: str
    recipe: dict[str, float]  # pack name -> weight
    # Other names that select this voice: earlier names (stored configs and
    # scripts keep working) and OpenAI's voice names.
    aliases: tuple[str, ...] = ()
    language: str | None = None  # the language it is native in (None: the earlier seven)
    accent: str | None = None  # what a listener hears, e.g. "British English"
    default_for: tuple[str, ...] = ()  # languages that speak with it when no voice is named


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

# The default voice before the standard voices, and still without them.
EARLIER_DEFAULT_VOICE = "clear_female"

PACK_SEX = {
    "jf_alpha": "F",
    "jf_gongitsune": "F",
    "jf_nezumi": "F",
    "jf_tebukuro": "F",
    "jm_kumo": "M",
}

# The built-in voices cloning compares a clone with when Kokoro's other packs
# are not installed: the earlier seven (the atlas's labelled rows). With them,
# the 54 standard voices (synth/voice/stock_voices.py: the stock check and the
# quality report's closest built-in, same sex as the reference, its language's
# where it has some, the few closest by the atlas's embeddings heard).
FALLBACK_COMPARISON_VOICES: tuple[str, ...] = tuple(v.name for v in BLENDS + PACKS)


def builtin_sex(name: str) -> str:
    """The sex of a built-in voice by its catalog name: "F", "M" or "?"."""
    standard = parse_standard(name)
    if standard is not None:
        return standard.sex
    for voice in BLENDS + PACKS:
        if name == voice.name or name in voice.aliases:
            return voice.sex
    return "?"


def openai_aliases() -> dict[str, str]:
    """OpenAI voice name -> the voice it speaks with in the earlier seven's catalog
    (with the standard voices installed: :data:`OPENAI_STANDARD`)."""
    return {
        alias: v.name for v in BLENDS for alias in v.aliases if alias in OPENAI_FEMALE + OPENAI_MALE
    }


def legacy_aliases() -> dict[str, str]:
    """Earlier built-in name (a pack id) -> its plain name among the earlier seven
    (what the atlas's labels are called: :data:`FALLBACK_COMPARISON_VOICES`)."""
    return {alias: v.name for v in BLENDS + PACKS for alias in v.aliases if alias in PACK_SEX}


def catalog_comparison(
    pack_names: Iterable[str], labels: Iterable[str] = ()
) -> dict[str, ComparisonVoice]:
    """Kokoro's comparison voices (synth/voice/stock_voices.py) for an atlas on
    ``pack_names``: the standard voices but the Santa Claus characters, keyed by
    pack, when packs beyond the five shipped ones are standard voices; else the
    earlier seven, keyed by the atlas's labels (pack ids and blend names, and
    any other ``labels`` the atlas has)."""
    names = list(pack_names)
    standard = {}
    for name in names:
        parsed = parse_standard(name)
        if parsed is not None and name not in CHARACTER_VOICES:
            standard[name] = ComparisonVoice(name, parsed.sex, parsed.language)
    if any(name not in PACK_SEX for name in standard):
        return standard
    aliases = legacy_aliases()
    keys = [*PACK_SEX, *(blend.name for blend in BLENDS), *(label for label in labels if label)]
    return {
        key: ComparisonVoice(aliases.get(key, key), builtin_sex(aliases.get(key, key)), None)
        for key in keys
    }


def blend_packs(packs: dict[str, np.ndarray], recipe: dict[str, float]) -> np.ndarray:
    total = sum(recipe.values())
    out = np.zeros_like(next(iter(packs.values())), dtype=np.float32)
    for name, weight in recipe.items():
        out += packs[name].astype(np.float32) * (weight / total)
    return out


def has_standard_voices(packs: dict[str, np.ndarray]) -> bool:
    """Whether ``packs`` holds standard voices beyond the five shipped Japanese ones."""
    return any(parse_standard(name) is not None for name in packs if name not in PACK_SEX)


def builtin_voices(
    packs: dict[str, np.ndarray], extra: dict[str, np.ndarray] | None = None
) -> dict[str, tuple[BuiltinVoice, np.ndarray]]:
    """Name -> (description, style pack) for every built-in voice.

    ``packs`` are the model's shipped packs, ``extra`` Kokoro's other packs when
    installed: then every pack is a voice under its standard name, followed by
    the two clear blends; else the earlier seven (:func:`earlier_voices`).
    """
    everything = {**(extra or {}), **packs}
    if not has_standard_voices(everything):
        return earlier_voices(packs)
    return standard_voices(everything)


def earlier_voices(packs: dict[str, np.ndarray]) -> dict[str, tuple[BuiltinVoice, np.ndarray]]:
    """The seven voices of the shipped packs, as before the standard voices.

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


def standard_voices(packs: dict[str, np.ndarray]) -> dict[str, tuple[BuiltinVoice, np.ndarray]]:
    """Every pack under its standard name (by language, each language's default
    first), then the two clear blends; the earlier plain names (``yuki``) are
    aliases of the pack they always were, OpenAI's names of native English voices."""
    former = {next(iter(v.recipe)): v.name for v in PACKS}
    voices: dict[str, tuple[BuiltinVoice, np.ndarray]] = {}
    for name in sorted(packs, key=catalog_order):
        standard = parse_standard(name)
        style = np.asarray(packs[name], dtype=np.float32)
        if standard is None:
            voices[name] = (BuiltinVoice(name, f"voice {name}", "?", {name: 1.0}), style)
            continue
        default_for = tuple(lang for lang, voice in LANGUAGE_DEFAULTS.items() if voice == name)
        aliases = tuple(a for a, voice in OPENAI_STANDARD.items() if voice == name)
        sex = "female" if standard.sex == "F" else "male"
        description = f"{standard.accent} {sex} voice"
        if name in CHARACTER_VOICES:
            description += ", a Santa Claus character"
        if default_for:
            description += "; the default for " + standard.accent
        if name in former:
            aliases = (former[name], *aliases)
            description += f" (earlier name: {former[name]})"
        info = BuiltinVoice(
            name,
            description,
            standard.sex,
            {name: 1.0},
            aliases,
            language=standard.language,
            accent=standard.accent,
            default_for=default_for,
        )
        voices[name] = (info, style)
    for blend in BLENDS:
        if all(pack in packs for pack in blend.recipe):
            described = blend.description.replace("; the default", "")
            described += "; a blend of Japanese voices"
            if blend.name == EARLIER_DEFAULT_VOICE:
                described += ", the earlier default"
            info = BuiltinVoice(
                blend.name,
                described,
                blend.sex,
                blend.recipe,
            )
            voices[blend.name] = (info, blend_packs(packs, blend.recipe))
    return voices
