"""Per-language normalization, Japanese/Chinese G2P, the G2P router and mixed-language plans."""

from __future__ import annotations

import pytest

from voxclone.errors import UnsupportedLanguage
from voxclone.synth.engine.kokoro.assets import load_vocab
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.g2p_ja import JapaneseG2P, kana_to_phonemes
from voxclone.synth.text.g2p_router import MultiG2P
from voxclone.synth.text.g2p_zh import ChineseG2P
from voxclone.synth.text.normalize_intl import (
    chinese_number,
    french_number,
    hindi_number,
    international_normalizers,
    italian_number,
    portuguese_number,
    spanish_number,
)

NORMALIZE = international_normalizers()

SAMPLES = {
    "en-us": "The museum opens at nine in the morning.",
    "en-gb": "The museum opens at nine in the morning.",
    "es": "El museo abre a las nueve de la mañana.",
    "fr": "Le musée ouvre à neuf heures du matin.",
    "it": "Il museo apre alle nove del mattino.",
    "pt-br": "O museu abre às nove horas da manhã.",
    "hi": "संग्रहालय सुबह नौ बजे खुलता है।",
    "ja": "博物館は朝九時に開きます。",
    "zh": "博物馆早上九点开门。",
}


@pytest.fixture(scope="module")
def vocab() -> dict[str, int]:
    return dict(load_vocab())


@pytest.fixture(scope="module")
def g2p(vocab: dict[str, int]) -> MultiG2P:
    return MultiG2P(vocab)


@pytest.fixture(scope="module")
def frontend(g2p: MultiG2P) -> TextFrontend:
    return TextFrontend(g2p, max_tokens=510)


# ------------------------------------------------------------------ number spelling


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "cero"),
        (16, "dieciséis"),
        (21, "veintiuno"),
        (42, "cuarenta y dos"),
        (100, "cien"),
        (101, "ciento uno"),
        (555, "quinientos cincuenta y cinco"),
        (1000, "mil"),
        (21_000, "veintiún mil"),
        (2_000_000, "dos millones"),
        (1_001_000, "un millón mil"),
    ],
)
def test_spanish_numbers(n: int, words: str) -> None:
    assert spanish_number(n) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (21, "vingt et un"),
        (71, "soixante et onze"),
        (75, "soixante-quinze"),
        (80, "quatre-vingts"),
        (81, "quatre-vingt-un"),
        (99, "quatre-vingt-dix-neuf"),
        (200, "deux cents"),
        (201, "deux cent un"),
        (1000, "mille"),
        (80_000, "quatre-vingt mille"),
        (2_000_000, "deux millions"),
    ],
)
def test_french_numbers(n: int, words: str) -> None:
    assert french_number(n) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (21, "ventuno"),
        (23, "ventitré"),
        (28, "ventotto"),
        (108, "centotto"),
        (180, "centottanta"),
        (1000, "mille"),
        (2023, "duemilaventitré"),
        (1_000_000, "un milione"),
    ],
)
def test_italian_numbers(n: int, words: str) -> None:
    assert italian_number(n) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (16, "dezesseis"),
        (42, "quarenta e dois"),
        (100, "cem"),
        (101, "cento e um"),
        (1001, "mil e um"),
        (1100, "mil e cem"),
        (1234, "mil duzentos e trinta e quatro"),
        (2_000_000, "dois milhões"),
    ],
)
def test_portuguese_numbers(n: int, words: str) -> None:
    assert portuguese_number(n) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (42, "बयालीस"),
        (99, "निन्यानवे"),
        (305, "तीन सौ पाँच"),
        (1999, "एक हज़ार नौ सौ निन्यानवे"),
        (123_456, "एक लाख तेईस हज़ार चार सौ छप्पन"),
        (10_000_000, "एक करोड़"),
    ],
)
def test_hindi_numbers(n: int, words: str) -> None:
    assert hindi_number(n) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (10, "十"),
        (15, "十五"),
        (110, "一百一十"),
        (105, "一百零五"),
        (1005, "一千零五"),
        (10_050, "一万零五十"),
        (200, "两百"),
        (20, "二十"),
        (100_010_000, "一亿零一万"),
    ],
)
def test_chinese_numbers(n: int, words: str) -> None:
    assert chinese_number(n) == words


# ---------------------------------------------------------------- sentence normalizers


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        ("es", "Tengo 42 años.", "Tengo cuarenta y dos años."),
        ("es", "Cuesta 2,50 €.", "Cuesta dos euros con cincuenta céntimos."),
        (
            "es",
            "Hay 1.500 libros, el 25 % del total.",
            "Hay mil quinientos libros, el veinticinco por ciento del total.",
        ),
        ("es", "Llegó el 1º y ella la 3ª.", "Llegó el primero y ella la tercera."),
        (
            "fr",
            "Il a 3,5 ans, le 1er mai, la 2e fois.",
            "Il a trois virgule cinq ans, le premier mai, la deuxième fois.",
        ),
        ("fr", "Prix : 1 000 €", "Prix : mille euros"),
        (
            "it",
            "Ho 28 anni e il 3,5% di sconto.",
            "Ho ventotto anni e il tre virgola cinque per cento di sconto.",
        ),
        (
            "pt-br",
            "Custa R$ 1.234,56.",
            "Custa mil duzentos e trinta e quatro reais e cinquenta e seis centavos.",
        ),
        ("pt-br", "Faz -5 graus.", "Faz menos cinco graus."),
        ("hi", "मेरे पास ४२ किताबें हैं।", "मेरे पास बयालीस किताबें हैं."),
        ("hi", "कीमत ₹1,23,456 है", "कीमत एक लाख तेईस हज़ार चार सौ छप्पन रुपये है"),
        ("hi", "12.5% लोग", "बारह दशमलव पाँच प्रतिशत लोग"),
        (
            "ja",
            "価格は¥1,234で、3.14と50%、-5度です",
            "価格は1234円で、3点一四と50パーセント、マイナス5度です",
        ),
        ("ja", "４２人", "42人"),
        (
            "zh",
            "我有25个苹果，2024年，50%，¥99.5，-5度",
            "我有二十五个苹果，二零二四年，百分之五十，九十九点五元，负五度",
        ),
    ],
)
def test_normalizers_spell_numbers(language: str, text: str, expected: str) -> None:
    assert NORMALIZE[language](text) == expected


def test_long_digit_strings_are_read_digit_by_digit() -> None:
    assert NORMALIZE["es"]("código 0042") == "código cero cero cuatro dos"
    assert NORMALIZE["zh"]("号码0042") == "号码零零四二"


# ------------------------------------------------------------------------ Japanese


@pytest.mark.parametrize(
    ("kana", "phonemes"),
    [
        ("トーキョー", "toːkʲoː"),
        ("シンブン", "ɕimbɯɴ"),
        ("ニホンゴ", "ɲihoŋɡo"),
        ("カンジ", "kaɲʥi"),
        ("キッテ", "kʲiʔte"),
        ("ティーカップ", "tʲiːkaʔpɯ"),
        ("シュークリーム", "ɕɨːkɯɾʲiːmɯ"),
        ("ファイル", "ɸaiɾɯ"),
        ("こんにちは", "koɲɲiʨiha"),
    ],
)
def test_kana_follow_kokoro_conventions(kana: str, phonemes: str) -> None:
    assert kana_to_phonemes(kana) == phonemes


def test_japanese_sentence_uses_readings_and_particles() -> None:
    phonemes = JapaneseG2P().phonemize("東京は今日、晴れです。ちょっと待って。")
    assert phonemes == "toːkʲoː βa kʲoː, haɾe desɨ. ʨoʔto maʔte."


# ------------------------------------------------------------------------- Chinese


def test_chinese_g2p_gives_tones(vocab: dict[str, int]) -> None:
    phonemes = ChineseG2P().phonemize("你好，世界。")
    assert "↓" in phonemes and "↘" in phonemes
    assert all(ch in vocab for ch in phonemes)


# --------------------------------------------------------------------------- router


def test_router_speaks_every_language_without_dropping_symbols(
    g2p: MultiG2P, vocab: dict[str, int]
) -> None:
    assert set(g2p.languages) == set(SAMPLES)
    for language, text in SAMPLES.items():
        phonemes = g2p.phonemize(NORMALIZE.get(language, str)(text), language)
        letters = [ch for ch in phonemes if ch.isalpha()]
        assert len(letters) >= 10, language
        assert all(ch in vocab for ch in phonemes), language
        assert len(g2p.token_ids(phonemes)) == len(phonemes)


def test_korean_is_refused_with_the_supported_list(g2p: MultiG2P) -> None:
    with pytest.raises(UnsupportedLanguage) as caught:
        g2p.phonemize("안녕하세요", "ko")
    assert caught.value.field == "language"
    assert "ja" in caught.value.limit and "ko" not in caught.value.limit


# ------------------------------------------------------------------------- frontend


def test_plan_normalizes_with_the_language_rules(frontend: TextFrontend) -> None:
    chunks = list(frontend.plan("Tengo 42 años.", "es"))
    assert chunks[0].text == "Tengo cuarenta y dos años."


def test_mixed_sentence_speaks_each_run_with_its_own_g2p(frontend: TextFrontend) -> None:
    chunks = list(frontend.plan("I said こんにちは to her.", "en-us"))
    assert len(chunks) == 1
    phonemes = chunks[0].phonemes
    assert "koɲɲiʨiβa" in phonemes  # Japanese reading, particle は as βa
    assert "hɜɹ" in phonemes  # English "her" from espeak


def test_auto_detects_the_language(frontend: TextFrontend) -> None:
    chunks = list(frontend.plan("博物馆早上九点开门。", "auto"))
    assert "↓" in chunks[0].phonemes or "↘" in chunks[0].phonemes


def test_korean_text_is_refused_clearly(frontend: TextFrontend) -> None:
    with pytest.raises(UnsupportedLanguage) as caught:
        list(frontend.plan("Hello 안녕하세요", "en-us"))
    assert "supported" in caught.value.message and "zh" in caught.value.limit


def test_every_language_plans_to_token_ids(frontend: TextFrontend) -> None:
    for language, text in SAMPLES.items():
        chunks = list(frontend.plan(text, language))
        assert chunks and all(0 < len(c.token_ids) <= 500 for c in chunks), language
