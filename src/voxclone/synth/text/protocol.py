"""What the frontend and the cloner need from a grapheme-to-phoneme component."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class G2P(Protocol):
    @property
    def languages(self) -> tuple[str, ...]: ...

    def phonemize(self, text: str, language: str) -> str:
        """Kokoro phoneme string for ``text`` (already normalized for speech)."""
        ...

    def token_ids(self, phonemes: str) -> tuple[int, ...]: ...


@runtime_checkable
class IpaInput(Protocol):
    """A G2P that can also speak IPA written by a person (inline phonemes, SSML
    ``<phoneme>``, lexicon entries). A G2P without it (a text engine's) speaks
    the word instead."""

    def from_ipa(self, ipa: str, language: str) -> str: ...
