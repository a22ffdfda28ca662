"""Japanese text → Kokoro phonemes, from pyopenjtalk readings.

Kokoro v1.0 learned Japanese from misaki's kana romanizer: one IPA-ish
spelling per mora (し → ɕi, つ → ʦɨ, ふ → ɸɯ, yōon with ɨ: しゅ → ɕɨ), ー as a
length mark, っ as a glottal stop ʔ, ん assimilated to the next consonant
within a word, words separated by spaces and no pitch-accent marks. We follow
those conventions so the model hears what it was trained on, but get the
readings from pyopenjtalk-plus (dictionary inside the wheel, works offline),
which also resolves kanji, numbers with counters (3杯 → サンバイ) and
particles (は → ワ).
"""

from __future__ import annotations

import re
import threading

# One row per consonant: the phonemes for the a, i, u, e, o columns ("" = no kana there).
_GOJUON: tuple[tuple[str, tuple[str, str, str, str, str]], ...] = (
    ("アイウエオ", ("a", "i", "ɯ", "e", "o")),
    ("カキクケコ", ("ka", "kʲi", "kɯ", "ke", "ko")),
    ("ガギグゲゴ", ("ɡa", "ɡʲi", "ɡɯ", "ɡe", "ɡo")),
    ("サシスセソ", ("sa", "ɕi", "sɨ", "se", "so")),
    ("ザジズゼゾ", ("ʣa", "ʥi", "zɨ", "ʣe", "ʣo")),
    ("タチツテト", ("ta", "ʨi", "ʦɨ", "te", "to")),
    ("ダヂヅデド", ("da", "ʥi", "zɨ", "de", "do")),
    ("ナニヌネノ", ("na", "ɲi", "nɯ", "ne", "no")),
    ("ハヒフヘホ", ("ha", "çi", "ɸɯ", "he", "ho")),
    ("バビブベボ", ("ba", "bʲi", "bɯ", "be", "bo")),
    ("パピプペポ", ("pa", "pʲi", "pɯ", "pe", "po")),
    ("マミムメモ", ("ma", "mʲi", "mɯ", "me", "mo")),
    ("ラリルレロ", ("ɾa", "ɾʲi", "ɾɯ", "ɾe", "ɾo")),
    ("ァィゥェォ", ("a", "i", "ɯ", "e", "o")),
)
_OTHER_KANA = {
    "ヤ": "ja",
    "ユ": "jɯ",
    "ヨ": "jo",
    "ャ": "ja",
    "ュ": "jɯ",
    "ョ": "jo",
    "ワ": "βa",
    "ヮ": "βa",
    "ヰ": "i",
    "ヱ": "e",
    "ヲ": "o",
    "ヴ": "vɯ",
    "ヵ": "ka",
    "ヶ": "ke",
}

# Yōon: an i-column kana + small ya/yu/ye/yo keeps the palatal onset and swaps the vowel.
_YOON_VOWELS = {"ャ": "a", "ュ": "ɨ", "ョ": "o", "ェ": "e"}

# Loanword combinations that are not plain yōon.
_SPECIAL_DIGRAPHS = {
    "イェ": "je",
    "ウィ": "βi",
    "ウェ": "βe",
    "ウォ": "βo",
    "クァ": "kᵝa",
    "クィ": "kᵝi",
    "クェ": "kᵝe",
    "クォ": "kᵝo",
    "グァ": "ɡᵝa",
    "グィ": "ɡᵝi",
    "グェ": "ɡᵝe",
    "グォ": "ɡᵝo",
    "ツァ": "ʦa",
    "ツィ": "ʦʲi",
    "ツェ": "ʦe",
    "ツォ": "ʦo",
    "ティ": "tʲi",
    "テュ": "tʲɨ",
    "ディ": "dʲi",
    "デュ": "dʲɨ",
    "トゥ": "tɯ",
    "ドゥ": "dɯ",
    "ファ": "ɸa",
    "フィ": "ɸʲi",
    "フェ": "ɸe",
    "フォ": "ɸo",
    "フュ": "ɸʲɨ",
    "フョ": "ɸʲo",
    "ヴァ": "va",
    "ヴィ": "vʲi",
    "ヴェ": "ve",
    "ヴォ": "vo",
    "ヴュ": "vʲɨ",
    "ヴョ": "vʲo",
}


def _build_tables() -> tuple[dict[str, str], dict[str, str]]:
    single = dict(_OTHER_KANA)
    digraphs = dict(_SPECIAL_DIGRAPHS)
    for kana_row, phonemes in _GOJUON:
        single.update(zip(kana_row, phonemes, strict=True))
        i_kana, i_phonemes = kana_row[1], phonemes[1]
        if kana_row == "アイウエオ" or kana_row == "ァィゥェォ":
            continue
        onset = i_phonemes[:-1]  # kʲi → kʲ, ɕi → ɕ
        for small, vowel in _YOON_VOWELS.items():
            digraphs.setdefault(i_kana + small, onset + vowel)
    return single, digraphs


_SINGLE, _DIGRAPHS = _build_tables()

# ん before a consonant takes its place of articulation (within a word).
_NASAL_BY_ONSET = (
    (("m", "p", "b"), "m"),
    (("k", "ɡ"), "ŋ"),
    (("ɲ", "ʨ", "ʥ"), "ɲ"),
    (("n", "t", "d", "ɾ", "z", "ʦ", "ʣ"), "n"),
)

_PUNCTUATION = {
    "。": ".",
    "．": ".",
    ".": ".",
    "、": ",",
    "，": ",",
    ",": ",",
    "？": "?",
    "?": "?",
    "！": "!",
    "!": "!",
    "：": ":",
    ":": ":",
    "；": ";",
    ";": ";",
    "…": "…",
    "「": "“",
    "『": "“",
    "」": "”",
    "』": "”",
    "（": "“",
    "）": "”",
    "・": "",
    "～": "—",
    "〜": "—",
    "ー": "—",
    "—": "—",
}
_OPENING = {"“"}

_HIRAGANA_TO_KATAKANA = {code: code + 0x60 for code in range(0x3041, 0x3097)}


def _nasal_before(next_phonemes: str) -> str:
    for onsets, nasal in _NASAL_BY_ONSET:
        if next_phonemes.startswith(onsets):
            return nasal
    return "ɴ"


def kana_to_phonemes(kana: str) -> str:
    """Katakana (or hiragana) reading of one word → Kokoro phonemes."""
    kana = kana.translate(_HIRAGANA_TO_KATAKANA)
    morae: list[str] = []
    i = 0
    while i < len(kana):
        pair = kana[i : i + 2]
        if pair in _DIGRAPHS:
            morae.append(_DIGRAPHS[pair])
            i += 2
            continue
        char = kana[i]
        if char == "ッ":
            morae.append("ʔ")
        elif char == "ー":
            morae.append("ː")
        elif char == "ン":
            morae.append("ン")  # resolved below, once the next mora is known
        else:
            morae.append(_SINGLE.get(char, ""))
        i += 1
    for index, mora in enumerate(morae):
        if mora == "ン":
            following = next((m for m in morae[index + 1 :] if m), "")
            morae[index] = _nasal_before(following)
    return "".join(morae)


class JapaneseG2P:
    """pyopenjtalk readings → Kokoro phonemes. Thread-safe."""

    language = "ja"

    def __init__(self) -> None:
        # OpenJTalk's frontend keeps state in C; serialize calls.
        self._lock = threading.Lock()

    def phonemize(self, text: str) -> str:
        text = text.strip()
        if not text:
            return ""
        import pyopenjtalk

        with self._lock:
            nodes = pyopenjtalk.run_frontend(text, use_sudachi_kanji_yomi=False)
        pieces: list[str] = []
        for node in nodes:
            surface = node["string"]
            if node["pos"] == "記号" or surface in _PUNCTUATION:
                pieces.extend(_PUNCTUATION.get(ch, "") for ch in surface)
                continue
            reading = re.sub(r"[’']", "", node["pron"])
            phonemes = kana_to_phonemes(reading)
            if phonemes:
                pieces.append(" " + phonemes)
        return _tidy("".join(pieces))


def _tidy(phonemes: str) -> str:
    # A word-final っ belongs to the next word's onset (待っ|て): no pause there.
    phonemes = re.sub(r"ʔ +", "ʔ", phonemes)
    phonemes = re.sub(r"([“])\s+", r"\1", phonemes)
    phonemes = re.sub(r"(?<=[.,!?:;…”—])(?=[^\s.,!?:;…”—])", " ", phonemes)
    return re.sub(r"\s+", " ", phonemes).strip()
