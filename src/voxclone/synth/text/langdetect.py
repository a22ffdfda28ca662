"""Which language is this text in, and where does it switch?

Script decides first because it is certain: kana → ja, Han without kana →
zh, Devanagari → hi, Hangul → ko. Only Latin-script text needs a statistical
guess, made by lingua restricted to the Latin languages we speak, in its
low-accuracy (trigram-only) mode: it loads in ~0.25 s and ~16 MB instead of
~2.2 s and ~140 MB for the full models, and a wrong guess on a short, low-
confidence text falls back to the default (en-us) rather than to a coin flip.

Mixed text ("Say こんにちは to her") is cut into runs of one script each;
digits, spaces and punctuation join the run they follow, so "価格は500円"
stays one Japanese run.

A Latin-script text stays in the *preferred* language (the voice's, else the
configured default) unless the text itself says otherwise. Trigrams alone
misread short English with foreign names ("Mister Nguyen is here." scored
French 0.65, "Order pizza margherita." Italian 0.98), so the guess must be
backed by the text's own grammar words (:data:`_FUNCTION_WORDS`: "is",
"the", "to" are English; "je", "pas" French): it switches only when the
guessed language's function words outnumber the preferred one's, or, with
none of either, when the text is long (:data:`_LONG_ENOUGH_WORDS`) and the
guess confident. Measured with studies/langdetect_short.py (docs/benchmarks.md,
"Language detection on short phrases").
"""

from __future__ import annotations

import re
import threading
import unicodedata
from typing import Any

DEFAULT_LANGUAGE = "en-us"
_MIN_WORDS_TO_GUESS = 3
# A text this short leaves the default language only on a near-certain guess.
# Trigrams of two or three words mislead: "Hello there." scored Spanish 0.52
# (and was spoken with Spanish phonemes, heard back as "Is your petta?"),
# "Wait a minute." French 0.74; real short foreign phrases ("Buenos días.",
# "Merci beaucoup.", "Obrigado, até logo.") score 1.00. Measured with
# studies/short_phrases.py and lingua's low-accuracy mode.
_SHORT_TEXT_WORDS = 4
_SHORT_TEXT_MIN_CONFIDENCE = 0.9
LATIN_LANGUAGES = ("en-us", "en-gb", "es", "fr", "it", "pt-br")
# Without function words of either language, a guess this many words long (and
# past the guesser's own confidence bar) may still switch the language.
_LONG_ENOUGH_WORDS = 8


def _words(spaced: str) -> frozenset[str]:
    return frozenset(spaced.split())


# The most frequent short words of each language (articles, prepositions,
# pronouns, auxiliaries, greetings): evidence no name or place carries.
# Words two languages share count for both, so they weigh nothing between them.
_FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "en": _words(
        "the a an and or but of to in on at for with from by as is are was were be been "
        "am it its this that these those you your he she his her we our they their i my "
        "me not no do does did have has had will would can could here there what where "
        "when who how please hello hi thanks thank good yes s t ll re ve"
    ),
    "es": _words(
        "el la los las un una unos unas y o pero de del al a en con por para que es son "
        "está están estás era fue yo tú él ella nosotros usted no sí muy hola gracias "
        "buenos buenas dónde cómo qué cuándo"
    ),
    "fr": _words(
        "le la les un une des et ou mais de du au aux à en dans avec pour par sur que qui "
        "est sont était je tu il elle nous vous ils elles ne pas oui non très bonjour "
        "merci ce cette ces c d l j qu"
    ),
    "it": _words(
        "il lo la i gli le un una uno e o ma di del della dei delle da in con per su sul "
        "nel che è sono era io tu lui lei noi voi non sì molto ciao grazie buongiorno come "
        "dove quando questo questa tutto"
    ),
    "pt": _words(
        "o a os as um uma uns umas e ou mas de do da dos das em no na nos nas com por para "
        "que é são está estou eu você ele ela nós não sim muito olá obrigado obrigada bom "
        "boa dia onde como tudo até"
    ),
}
_WORD = re.compile(r"[^\W\d_]+")


def _family(language: str) -> str:
    """en-us and en-gb are one language here; pt-br is Portuguese."""
    return language.split("-")[0]


def function_words(text: str, language: str) -> int:
    """How many of ``text``'s words are function words of ``language``."""
    vocabulary = _FUNCTION_WORDS.get(_family(language), frozenset())
    return sum(1 for word in _WORD.findall(text.lower()) if word in vocabulary)


# Scripts we classify letters into. "neutral" = digits, spaces, punctuation, symbols.
_KANA, _HAN, _DEVANAGARI, _HANGUL, _LATIN, _OTHER, _NEUTRAL = (
    "kana",
    "han",
    "devanagari",
    "hangul",
    "latin",
    "other",
    "neutral",
)

_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x3040, 0x30FF, _KANA),  # hiragana + katakana (ー included)
    (0x31F0, 0x31FF, _KANA),
    (0xFF66, 0xFF9F, _KANA),  # half-width katakana
    (0x3400, 0x4DBF, _HAN),
    (0x4E00, 0x9FFF, _HAN),
    (0xF900, 0xFAFF, _HAN),
    (0x3005, 0x3007, _HAN),  # 々 〆 〇
    (0x0900, 0x097F, _DEVANAGARI),
    (0xA8E0, 0xA8FF, _DEVANAGARI),
    (0x1100, 0x11FF, _HANGUL),
    (0x3130, 0x318F, _HANGUL),
    (0xAC00, 0xD7AF, _HANGUL),
)


def script_of(char: str) -> str:
    code = ord(char)
    for low, high, script in _RANGES:
        if low <= code <= high:
            # Devanagari digits and danda are neutral like any digit or full stop,
            # so that "४२" after English text does not open a Hindi run by itself.
            if script == _DEVANAGARI and (char.isdigit() or char in "।॥"):
                return _NEUTRAL
            return script
    if not char.isalpha():
        return _NEUTRAL
    if unicodedata.name(char, "").startswith("LATIN"):
        return _LATIN
    return _OTHER


class LatinLanguageGuesser:
    """lingua over our Latin-script languages; built on first use."""

    _CODES = {
        "ENGLISH": "en-us",
        "SPANISH": "es",
        "FRENCH": "fr",
        "ITALIAN": "it",
        "PORTUGUESE": "pt-br",
    }

    def __init__(self, *, min_confidence: float = 0.5) -> None:
        self._min_confidence = min_confidence
        self._detector: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._detector is None:
                from lingua import Language, LanguageDetectorBuilder

                languages = [getattr(Language, name) for name in self._CODES]
                self._detector = (
                    LanguageDetectorBuilder.from_languages(*languages)
                    .with_low_accuracy_mode()
                    .with_preloaded_language_models()
                    .build()
                )
            return self._detector

    def warm(self) -> None:
        self._load()

    def guess(self, text: str) -> str | None:
        """Our code for the language of ``text``, or None when unsure."""
        if not any(ch.isalpha() for ch in text):
            return None
        values = self._load().compute_language_confidence_values(text)
        needed = self._min_confidence
        if len(text.split()) < _SHORT_TEXT_WORDS:
            needed = max(needed, _SHORT_TEXT_MIN_CONFIDENCE)
        if not values or values[0].value < needed:
            return None
        return self._CODES.get(values[0].language.name)


class LanguageDetector:
    def __init__(
        self, *, default: str = DEFAULT_LANGUAGE, latin: LatinLanguageGuesser | None = None
    ) -> None:
        self._default = default
        self._latin = latin or LatinLanguageGuesser()

    def warm(self) -> None:
        self._latin.warm()

    def detect_language(self, text: str, prefer: str | None = None) -> str:
        """The main language of ``text``: the script with the most letters decides.

        ``prefer`` (the voice's language; default: the configured default) is
        kept for Latin-script text unless the text says otherwise (see the
        module's docstring).
        """
        counts: dict[str, int] = {}
        for char in text:
            script = script_of(char)
            if script not in (_NEUTRAL, _OTHER):
                counts[script] = counts.get(script, 0) + 1
        if not counts:
            return self._default
        if counts.get(_KANA):
            # Japanese writes most content words in kanji: kana anywhere makes Han Japanese.
            counts[_KANA] += counts.pop(_HAN, 0)
        script = max(counts, key=lambda s: counts[s])
        if script == _LATIN:
            # lingua encodes to UTF-8: a lone surrogate (which names no
            # language anyway) must not make detection fail.
            clean = text.encode("utf-8", "replace").decode("utf-8")
            return self._latin_language(clean, prefer or self._default)
        return _SCRIPT_LANGUAGE[script]

    def _latin_language(self, text: str, prefer: str) -> str:
        guess = self._latin.guess(text)
        if prefer not in LATIN_LANGUAGES:
            # A Japanese voice reading English: nothing to keep.
            return guess or self._default
        if guess is None or _family(guess) == _family(prefer):
            return prefer
        theirs, ours = function_words(text, guess), function_words(text, prefer)
        if theirs > ours:
            return guess
        if theirs == ours == 0 and len(text.split()) >= _LONG_ENOUGH_WORDS:
            return guess
        return prefer

    def split_language_runs(self, text: str, default: str) -> list[tuple[str, str]]:
        """Cut ``text`` into (language, text) runs.

        Latin-script runs speak ``default`` when it is a Latin-script language.
        """
        has_kana = any(script_of(ch) == _KANA for ch in text)
        runs: list[list[str]] = []  # [script, text]
        for char in text:
            script = script_of(char)
            if script == _OTHER:
                script = _NEUTRAL  # letters of scripts we cannot speak ride along and get dropped
            if script in (_HAN, _KANA):
                # Kanji and kana form one run; kana anywhere (or a Japanese
                # default) makes it Japanese.
                script = _KANA if has_kana or default == "ja" else _HAN
            if runs and (script == _NEUTRAL or runs[-1][0] in (script, _NEUTRAL)):
                if runs[-1][0] == _NEUTRAL:
                    runs[-1][0] = script
                runs[-1][1] += char
            else:
                runs.append([script, char])
        result: list[tuple[str, str]] = []
        for script, chunk in runs:
            language = self._language_of_run(script, chunk, default)
            if result and result[-1][0] == language:
                result[-1] = (language, result[-1][1] + chunk)
            else:
                result.append((language, chunk))
        return [(language, chunk) for language, chunk in result if chunk.strip()]

    def _language_of_run(self, script: str, chunk: str, default: str) -> str:
        if script in (_LATIN, _NEUTRAL):
            if default in LATIN_LANGUAGES or script == _NEUTRAL:
                return default
            # One or two Latin words inside CJK or Hindi text are names and loanwords,
            # mostly English; trigram guesses on them are noise ("Python" → French).
            if len(chunk.split()) < _MIN_WORDS_TO_GUESS:
                return self._default
            return self._latin.guess(chunk) or self._default
        return _SCRIPT_LANGUAGE[script]


_SCRIPT_LANGUAGE = {_KANA: "ja", _HAN: "zh", _DEVANAGARI: "hi", _HANGUL: "ko"}

_shared: LanguageDetector | None = None
_shared_lock = threading.Lock()


def _detector() -> LanguageDetector:
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = LanguageDetector()
        return _shared


def detect_language(text: str, prefer: str | None = None) -> str:
    """Main language of ``text`` as one of our codes: ``prefer`` (default en-us)
    when unsure or when the text does not clearly say otherwise."""
    return _detector().detect_language(text, prefer)


def split_language_runs(text: str, default: str) -> list[tuple[str, str]]:
    """``text`` as consecutive (language, text) runs; see LanguageDetector."""
    return _detector().split_language_runs(text, default)
