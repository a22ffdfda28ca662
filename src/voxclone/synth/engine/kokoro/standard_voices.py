"""Kokoro's standard voice names, the measured default per language, OpenAI's names.

Kokoro-82M v1.0 names its 54 voice packs ``<language><sex>_<name>``: the first
letter is the language (``a`` American English, ``b`` British English, ``e``
Spanish, ``f`` French, ``h`` Hindi, ``i`` Italian, ``j`` Japanese, ``p``
Brazilian Portuguese, ``z`` Mandarin), the second the sex (``f``/``m``). Those
names are what every Kokoro user types (``af_heart``), so each installed pack
is a built-in voice under its own name (builtin_voices.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kokoro's language letter -> (our language code, the accent a listener hears).
# In this order the catalog lists them: English first, then by language code.
LANGUAGE_LETTERS: dict[str, tuple[str, str]] = {
    "a": ("en-us", "American English"),
    "b": ("en-gb", "British English"),
    "e": ("es", "Spanish"),
    "f": ("fr", "French"),
    "h": ("hi", "Hindi"),
    "i": ("it", "Italian"),
    "j": ("ja", "Japanese"),
    "p": ("pt-br", "Brazilian Portuguese"),
    "z": ("zh", "Mandarin Chinese"),
}
_SEX_LETTERS = {"f": "F", "m": "M"}
# Santa Claus character voices (a holiday novelty in Kokoro's set): offered
# like the others, never a language's default nor an OpenAI name's voice.
CHARACTER_VOICES = frozenset({"am_santa", "em_santa", "pm_santa"})
_NAME = re.compile(r"^(?P<lang>[a-z])(?P<sex>[fm])_[a-z]+$")

# The default voice of each language: the native voice with the best predicted
# naturalness (DNSMOS P.808) among those of acceptable intelligibility (English:
# Whisper tiny.en WER <= 5 % on the table's six sentences; Spanish, French,
# Italian, Portuguese, Japanese, Mandarin: Whisper base WER/CER <= 20 % on
# three, Mandarin's CER on the characters' pinyin; Hindi: P.808 alone),
# leaving out the Santa Claus character voices;
# where no native voice reaches the bar (French: ff_siwis, 26 %), the best
# native voice all the same. Measured by bench/voice_table.py
# (bench/results/voice_table.json, section "Voice table" of
# docs/benchmarks.md); tests/unit/test_standard_voices.py checks that this
# table is the one that file chose. P.808 of each: af_heart 4.35
# (clear_female, the earlier default: 3.69), bm_daniel 4.26, ef_dora 3.86,
# ff_siwis 3.84, hf_alpha 3.94, im_nicola 4.18, jf_alpha 3.90, pf_dora 3.75,
# zm_yunyang 3.90 (CER 9.4 %). Mandarin was chosen by P.808 alone until
# issue 46 (a user heard 以後我交往校明… from Whisper): zf_xiaoni (3.98) has a CER of 67 %;
# zf_xiaoxiao 3.0 % (3.83), zm_yunjian 6.1 % (3.88).
LANGUAGE_DEFAULTS: dict[str, str] = {
    "en-us": "af_heart",
    "en-gb": "bm_daniel",
    "es": "ef_dora",
    "fr": "ff_siwis",
    "hi": "hf_alpha",
    "it": "im_nicola",
    "ja": "jf_alpha",
    "pt-br": "pf_dora",
    "zh": "zm_yunyang",
}

# With the standard voices installed, each OpenAI name speaks with a native
# English voice of its sex, one voice per name (bench/voice_table.py
# choose_openai, from the same table): "alloy", the OpenAI clients' usual
# default, with the American English default; a name Kokoro gave one of its
# voices with that voice when the sex matches (nova, echo, onyx); the others
# with the best remaining voices of their sex by P.808 (all 4.13-4.28, WER 0 %).
# OpenAI's 2025 names were added after the eleven, by the same rule on the
# same table (python bench/voice_table.py --choose-only): marin the next female
# voice (bf_emma, P.808 4.13), cedar the next male (am_puck, 4.25).
OPENAI_STANDARD: dict[str, str] = {
    "alloy": "af_heart",
    "ballad": "bf_lily",
    "coral": "af_river",
    "fable": "af_sky",
    "nova": "af_nova",
    "sage": "bf_isabella",
    "shimmer": "af_jessica",
    "marin": "bf_emma",
    "ash": "am_liam",
    "echo": "am_echo",
    "onyx": "am_onyx",
    "verse": "bm_daniel",
    "cedar": "am_puck",
}


@dataclass(frozen=True)
class StandardName:
    language: str  # our language code (en-us, es, ...)
    accent: str  # what a listener hears: "American English", "Spanish", ...
    sex: str  # "F" or "M"


def parse_standard(name: str) -> StandardName | None:
    """Language, accent and sex a standard Kokoro name stands for; None for another name."""
    match = _NAME.match(name)
    if match is None or match.group("lang") not in LANGUAGE_LETTERS:
        return None
    language, accent = LANGUAGE_LETTERS[match.group("lang")]
    return StandardName(language, accent, _SEX_LETTERS[match.group("sex")])


def catalog_order(name: str) -> tuple[int, int, str]:
    """Sort key: by language (the order of :data:`LANGUAGE_LETTERS`), each
    language's default first, then by name."""
    info = parse_standard(name)
    if info is None:
        return (len(LANGUAGE_LETTERS), 1, name)
    position = list(LANGUAGE_LETTERS).index(name[0])
    return (position, 0 if LANGUAGE_DEFAULTS.get(info.language) == name else 1, name)
