"""Grapheme-to-phoneme with espeak-ng, mapped onto Kokoro's phoneme vocabulary.

Kokoro was trained on misaki's phoneme conventions, which fold English
diphthongs and affricates into single symbols (aɪ→I, eɪ→A, tʃ→ʧ …) and write
the American flap as T. espeak-ng writes IPA with tie bars and length marks,
so we rewrite its output into that alphabet. Symbols that still have no id are
logged once and dropped: an odd character in the input must never crash a
synthesis.

The other espeak languages were trained on a lighter rewrite: only the tied
pairs fold; everything else stays as espeak wrote it, ``ɐ`` included, so
Portuguese ``ã`` is ``ɐ̃`` as the Portuguese voices heard it, not English's
``ə``. French needs nothing more: its nasal vowels (base letter + U+0303),
``ʁ`` and ``œ`` all have ids. Kokoro's own rewrite also folds Italian's long
``s͡s`` into ``S``; the Italian voices say that S short ("rossa" heard as
"rosa", studies/g2p_conventions.py), so it stays ``ss`` here.

espeak-ng comes from the ``espeakng-loader`` wheel (library + data inside the
wheel), so no system package is needed.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping

from voxclone.errors import UnsupportedLanguage
from voxclone.synth.text.espeak_temp import espeak_copies_private

log = logging.getLogger(__name__)
# phonemizer warns on every call whose word count changed (punctuation runs);
# that is expected for our input and would flood logs, so it gets a quiet logger.
_QUIET = logging.getLogger("voxclone.phonemizer")
_QUIET.setLevel(logging.ERROR)

# Our language codes -> espeak-ng voice names.
ESPEAK_VOICES: dict[str, str] = {
    "en-us": "en-us",
    "en-gb": "en-gb",
    "es": "es",
    "fr": "fr-fr",
    "it": "it",
    "pt-br": "pt-br",
    "hi": "hi",
}

TIE = "\u0361"

# Ordered longest first at use time. Shared by every espeak language.
_COMMON: dict[str, str] = {
    f"a{TIE}ɪ": "I",
    f"a{TIE}ʊ": "W",
    f"e{TIE}ɪ": "A",
    f"ɔ{TIE}ɪ": "Y",
    f"d{TIE}ʒ": "ʤ",
    f"t{TIE}ʃ": "ʧ",
    f"t{TIE}s": "ʦ",
    f"d{TIE}z": "ʣ",
    f"t{TIE}ɕ": "ʨ",
    f"d{TIE}ʑ": "ʥ",
    "ɝ": "ɜɹ",
    "ɬ": "l",
    "\u0329": "",  # syllabic mark
    "\u032a": "",  # dental diacritic
    "\u0306": "",  # extra-short
    TIE: "",
}

# Kokoro's rewrite for the espeak languages other than English: these folds,
# the other tie bars and espeak's clitic hyphens ("lə- tʁˈɛ̃") removed, the
# rest kept. ɐ, ʲ and ɚ have ids, so they are not folded as in English.
_OTHER: dict[str, str] = {
    f"o{TIE}ʊ": "O",
    f"ə{TIE}ʊ": "Q",
    "-": "",
    "¿": "",  # Spanish opening marks: no id, nothing to say
    "¡": "",
    "«": "“",  # guillemets have no id; Kokoro's rewrite writes curly quotes
    "»": "”",
}

_ENGLISH: dict[str, str] = {
    "ɚ": "əɹ",
    "ɐ": "ə",
    "ʲ": "",
    "e": "A",  # espeak writes a bare e only in diphthong position for English
    "r": "ɹ",
    "x": "k",
    "ç": "k",
    "ʔ": "t",
    "ː": "",
}

_EN_US: dict[str, str] = {
    f"o{TIE}ʊ": "O",
    "ɜːɹ": "ɜɹ",
    "ɜː": "ɜɹ",
    "ɾ": "T",
    f"ɪ{TIE}ə": "iə",
}

_EN_GB: dict[str, str] = {
    f"ə{TIE}ʊ": "Q",
    f"o{TIE}ʊ": "Q",
    f"e{TIE}ə": "ɛː",
    f"ɪ{TIE}ə": "ɪə",
    f"ʊ{TIE}ə": "ʊə",
    "ː": "ː",  # British Kokoro voices use length marks
}


def _table_for(language: str) -> list[tuple[str, str]]:
    table = dict(_COMMON)
    if language.startswith("en"):
        table.update(_ENGLISH)
        table.update(_EN_US if language == "en-us" else _EN_GB)
    else:
        table.update(_OTHER)
    return sorted(table.items(), key=lambda kv: -len(kv[0]))


def _compile(table: list[tuple[str, str]]) -> tuple[re.Pattern[str], dict[str, str]]:
    mapping = dict(table)
    pattern = re.compile("|".join(re.escape(k) for k, _ in table))
    return pattern, mapping


class EspeakG2P:
    """Thread-safe espeak-ng phonemizer producing Kokoro phoneme strings."""

    def __init__(self, vocab: Mapping[str, int]) -> None:
        self._vocab = vocab
        self._backends: dict[str, object] = {}
        # espeak-ng keeps global state: one call at a time across all languages.
        self._lock = threading.Lock()
        self._rewrites = {lang: _compile(_table_for(lang)) for lang in ESPEAK_VOICES}
        self._warned: set[str] = set()
        self._configured = False

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(ESPEAK_VOICES)

    def _backend(self, language: str) -> object:
        if language not in ESPEAK_VOICES:
            raise UnsupportedLanguage(
                f"language '{language}' is not supported by the espeak frontend",
                field="language",
                limit=sorted(ESPEAK_VOICES),
            )
        backend = self._backends.get(language)
        if backend is None:
            if not self._configured:
                _point_phonemizer_at_bundled_espeak()
                self._configured = True
            from phonemizer.backend import EspeakBackend

            # phonemizer copies the library per backend; the copies must not
            # outlive loading (synth/text/espeak_temp.py).
            with espeak_copies_private():
                backend = EspeakBackend(
                    ESPEAK_VOICES[language],
                    preserve_punctuation=True,
                    with_stress=True,
                    tie=True,
                    language_switch="remove-flags",
                    words_mismatch="ignore",
                    logger=_QUIET,
                )
            self._backends[language] = backend
        return backend

    def phonemize(self, text: str, language: str) -> str:
        """Return Kokoro phonemes for ``text`` (already normalized for speech)."""
        text = text.strip()
        if not text:
            return ""
        with self._lock:
            backend = self._backend(language)
            raw = backend.phonemize([text], strip=True)[0]  # type: ignore[attr-defined]
        return self.to_kokoro(raw, language)

    def to_kokoro(self, ipa: str, language: str) -> str:
        pattern, mapping = self._rewrites.get(language, self._rewrites["en-us"])
        rewritten = pattern.sub(lambda m: mapping[m.group(0)], ipa)
        rewritten = re.sub(r"\s+", " ", rewritten).strip()
        return keep_known_phonemes(rewritten, self._vocab, self._warned)

    def from_ipa(self, ipa: str, language: str) -> str:
        """Kokoro phonemes for IPA a person wrote (``[word](/IPA/)``, ``<phoneme ph>``).

        People write diphthongs and affricates without espeak's tie bar
        ("toʊ", "tʃ"); they get one so the rewrite folds them like espeak's.
        Kokoro's own symbols (O, A, I …) pass through unchanged.
        """
        tied = _UNTIED.sub(lambda m: m.group(1) + TIE + m.group(2), ipa.replace("g", "ɡ"))
        return self.to_kokoro(tied.replace(TIE + TIE, TIE), language)

    def token_ids(self, phonemes: str) -> tuple[int, ...]:
        return tuple(self._vocab[ch] for ch in phonemes if ch in self._vocab)


# Untied diphthongs and affricates, as typed by hand.
_UNTIED = re.compile(r"([aeɔoə]|[dt](?=[ʒʃ]))([ɪʊʒʃ])")


def keep_known_phonemes(phonemes: str, vocab: Mapping[str, int], warned: set[str]) -> str:
    """``phonemes`` without the symbols Kokoro has no id for.

    A dropped symbol is logged once per ``warned`` set (the caller's, so each
    G2P warns on its own): saying the rest beats failing on an odd character.
    """
    kept = []
    for ch in phonemes:
        if ch in vocab:
            kept.append(ch)
        elif ch not in warned:
            warned.add(ch)
            log.warning("dropping phoneme without a Kokoro id", extra={"symbol": repr(ch)})
    return "".join(kept)


def _point_phonemizer_at_bundled_espeak() -> None:
    import espeakng_loader
    from phonemizer.backend.espeak.wrapper import EspeakWrapper

    EspeakWrapper.set_library(espeakng_loader.get_library_path())
    EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
