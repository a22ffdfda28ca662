"""A text engine's tokenizer for test engines: lower-cased characters to ids."""

from __future__ import annotations

ALPHABET = "abcdefghijklmnopqrstuvwxyz '.,?!"


class CharTokenizer:
    """Text in, character ids out: how a text engine's tokenizer plugs in."""

    languages: tuple[str, ...] = ("en-us",)

    def phonemize(self, text: str, language: str) -> str:
        return text.lower()

    def token_ids(self, units: str) -> tuple[int, ...]:
        return tuple(1 + ALPHABET.index(c) for c in units if c in ALPHABET)
