"""One G2P for every language we speak: espeak-ng, or the Japanese / Chinese G2Ps.

Kokoro is language-agnostic (it reads phoneme ids), so the only per-language
part of synthesis is this choice. Korean is deliberately absent: espeak-ng's
Korean skips the assimilation rules Korean pronunciation depends on
(반갑습니다 comes out "pɐnqɐps-ɯpnida" instead of "pangapsɯmnida", 좋네요 as
"t͡ɕot-nejo" instead of "ʨonnejo") and Kokoro v1.0 never heard Korean, so a
request for it gets a clear UnsupportedLanguage instead of mumbling.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from voxclone.errors import UnsupportedLanguage
from voxclone.synth.text.g2p import EspeakG2P, keep_known_phonemes
from voxclone.synth.text.g2p_ja import JapaneseG2P
from voxclone.synth.text.g2p_zh import ChineseG2P


class SingleLanguageG2P(Protocol):
    language: str

    def phonemize(self, text: str) -> str: ...


class MultiG2P:
    """Same surface as EspeakG2P (``languages``, ``phonemize``, ``token_ids``), more languages."""

    def __init__(
        self,
        vocab: Mapping[str, int],
        *,
        espeak: EspeakG2P | None = None,
        others: tuple[SingleLanguageG2P, ...] | None = None,
    ) -> None:
        self._vocab = vocab
        self._espeak = espeak or EspeakG2P(vocab)
        chosen = others if others is not None else (JapaneseG2P(), ChineseG2P())
        self._others: dict[str, SingleLanguageG2P] = {g2p.language: g2p for g2p in chosen}
        self._warned: set[str] = set()

    @property
    def languages(self) -> tuple[str, ...]:
        return self._espeak.languages + tuple(self._others)

    def phonemize(self, text: str, language: str) -> str:
        """Kokoro phonemes for ``text`` (already normalized) in ``language``."""
        other = self._others.get(language)
        if other is not None:
            return keep_known_phonemes(other.phonemize(text), self._vocab, self._warned)
        if language in self._espeak.languages:
            return self._espeak.phonemize(text, language)
        supported = sorted(self.languages)
        raise UnsupportedLanguage(
            f"language '{language[:16]}' is not supported; supported: {', '.join(supported)}",
            field="language",
            limit=supported,
        )

    def from_ipa(self, ipa: str, language: str) -> str:
        """Kokoro phonemes for IPA a person wrote (see ``EspeakG2P.from_ipa``)."""
        if language in self._espeak.languages:
            return self._espeak.from_ipa(ipa, language)
        return keep_known_phonemes(ipa, self._vocab, self._warned)

    def token_ids(self, phonemes: str) -> tuple[int, ...]:
        return tuple(self._vocab[ch] for ch in phonemes if ch in self._vocab)
