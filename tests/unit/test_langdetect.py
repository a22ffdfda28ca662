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


# Short English with foreign names, which trigrams read as French, Italian,
# Spanish or Portuguese (studies/langdetect_short.py; before: 30 of 42 English).
@pytest.mark.parametrize(
    "text",
    [
        "Mister Nguyen is here.",  # French 0.65: the lexicon's "Nguyen" was then skipped
        "The train to Lyon.",  # French 0.97
        "Send it to Dubois.",  # Portuguese 0.82
        "Meet Giovanni at noon.",  # Italian 0.76
        "Camille sent the photos.",  # Spanish 0.80
        "Order pizza margherita.",  # Italian 0.98, and no grammar word either way
    ],
)
def test_short_english_with_foreign_names_stays_english(text: str) -> None:
    assert detect_language(text) == "en-us"


def test_the_preferred_language_is_kept_unless_the_text_says_otherwise() -> None:
    detector = LanguageDetector()
    # The voice's language wins on short or ambiguous text ...
    assert detector.detect_language("Mister Nguyen is here.", prefer="en-gb") == "en-gb"
    assert detector.detect_language("Paolo e Lucia.", prefer="it") == "it"
    # ... and gives way to text whose own grammar words are another language's.
    assert detector.detect_language("Je ne sais pas.", prefer="en-us") == "fr"
    assert detector.detect_language("Carlos is coming tonight.", prefer="es") == "en-us"
    # A voice of a non-Latin language reading Latin text: the guess (or the default).
    assert detector.detect_language("Bonjour à tous, merci.", prefer="ja") == "fr"


def test_function_words_ignore_names_and_count_elisions() -> None:
    from voxclone.synth.text.langdetect import function_words

    assert function_words("Mister Nguyen is here.", "en-us") == 2
    assert function_words("Mister Nguyen is here.", "fr") == 0
    assert function_words("C'est l'heure d'y aller.", "fr") == 4  # c, est, l, d
