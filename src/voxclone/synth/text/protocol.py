"""What the frontend and the cloner need from a grapheme-to-phoneme component."""

from __future__ import annotations

from typing import Protocol


class G2P(Protocol):
    @property
    def languages(self) -> tuple[str, ...]: ...

    def phonemize(self, text: str, language: str) -> str:
        """Kokoro phoneme string for ``text`` (already normalized for speech)."""
        ...

    def token_ids(self, phonemes: str) -> tuple[int, ...]: ...
