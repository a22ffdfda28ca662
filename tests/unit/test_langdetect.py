"""Language detection by script and lingua, and splitting mixed text into runs."""

from __future__ import annotations

import pytest

from voxclone.synth.text.langdetect import (
    LanguageDetector,
    LatinLanguageGuesser,
    detect_language,
    script_of,
    split_language_runs,
)


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("東京は今日晴れです。", "ja"),
        ("ひらがなだけ", "ja"),
        ("我们今天去北京。", "zh"),
        ("नमस्ते, आप कैसे हैं?", "hi"),
        ("안녕하세요", "ko"),
        ("The weather is lovely today, isn't it?", "en-us"),
        ("Hola, ¿cómo estás hoy? Espero que muy bien.", "es"),
        ("Bonjour à tous, merci d'être venus ce soir.", "fr"),
        ("Il gatto dorme sul divano tutto il giorno.", "it"),
        ("Olá, como você está hoje? Estou muito bem.", "pt-br"),
    ],
)
def test_detects_language(text: str, language: str) -> None:
    assert detect_language(text) == language


@pytest.mark.parametrize(
    ("text", "language"),
    [
        # Short English that trigrams took for Spanish / French: spoken with the
        # wrong phonemes ("Hello there." was heard back as "Is your petta?").
        ("Hello there.", "en-us"),
        ("Wait a minute.", "en-us"),
        # Short foreign phrases the guesser is sure of still switch.
        ("Buenos días.", "es"),
        ("Merci beaucoup.", "fr"),
        ("Obrigado, até logo.", "pt-br"),
    ],
)
def test_short_texts_switch_language_only_when_the_guess_is_sure(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_unsure_or_empty_text_falls_back_to_the_default() -> None:
    assert detect_language("123 456") == "en-us"
    assert detect_language("") == "en-us"
    assert LanguageDetector(default="fr").detect_language("42 !") == "fr"


class _UnsureGuesser(LatinLanguageGuesser):
    def guess(self, text: str) -> str | None:
        return None


def test_low_confidence_latin_guess_uses_the_default() -> None:
    detector = LanguageDetector(default="en-gb", latin=_UnsureGuesser())
    assert detector.detect_language("Ciao a tutti") == "en-gb"


def test_majority_script_wins_and_kana_claims_kanji() -> None:
    assert detect_language("東京 is the capital, said the long English sentence.") == "en-us"
    assert detect_language("東京大学で勉強します") == "ja"
    assert detect_language("东京大学") == "zh"


def test_devanagari_digits_are_not_a_script() -> None:
    assert script_of("४") == "neutral"
    assert script_of("क") == "devanagari"


def test_mixed_text_is_split_into_runs() -> None:
    runs = split_language_runs("I said こんにちは to her.", "en-us")
    assert [language for language, _ in runs] == ["en-us", "ja", "en-us"]
    assert "".join(text for _, text in runs) == "I said こんにちは to her."


def test_digits_stay_with_the_run_they_follow() -> None:
    runs = split_language_runs("価格は500円です。Thank you very much, my friend.", "ja")
    assert runs[0] == ("ja", "価格は500円です。")
    assert runs[1][0] == "en-us"


def test_latin_runs_inherit_a_latin_default() -> None:
    assert split_language_runs("Hola amigo, hello friend.", "es") == [
        ("es", "Hola amigo, hello friend.")
    ]


def test_short_latin_words_in_cjk_text_are_english() -> None:
    runs = split_language_runs("我爱 Python 编程。", "zh")
    assert [language for language, _ in runs] == ["zh", "en-us", "zh"]


def test_longer_latin_runs_in_cjk_text_are_detected() -> None:
    runs = split_language_runs("日本語で話します。Muchas gracias por todo, amigos.", "ja")
    assert runs[-1][0] == "es"


def test_hangul_inside_english_is_its_own_run() -> None:
    runs = split_language_runs("Hello 안녕 world", "en-us")
    assert [language for language, _ in runs] == ["en-us", "ko", "en-us"]
