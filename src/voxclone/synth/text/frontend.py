"""Text → model-sized phoneme chunks, lazily, in speaking order.

The plan is a generator so that a book chapter never exists as a list of
audio-sized intermediate objects: each chunk is phonemized just before it is
synthesized. Chunks are cut at sentence boundaries, then at clauses when a
sentence exceeds the model's phoneme budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from voxclone.errors import InvalidInput
from voxclone.synth.text.g2p import EspeakG2P
from voxclone.synth.text.normalize_en import normalize_english
from voxclone.synth.text.segment import (
    clean_text,
    first_chunk_for_streaming,
    sentence_pause_s,
    split_for_budget,
    split_sentences,
)

Normalizer = Callable[[str], str]


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str
    phonemes: str
    token_ids: tuple[int, ...]
    pause_after_s: float


def _identity(text: str) -> str:
    return text


class TextFrontend:
    def __init__(
        self,
        g2p: EspeakG2P,
        *,
        max_tokens: int,
        normalizers: dict[str, Normalizer] | None = None,
    ) -> None:
        self._g2p = g2p
        # Leave headroom: the model's style pack holds one row per length and
        # espeak sometimes inserts a symbol or two at piece boundaries.
        self._budget = max_tokens - 10
        self._normalizers: dict[str, Normalizer] = {"en-us": normalize_english, "en-gb": normalize_english}
        if normalizers:
            self._normalizers.update(normalizers)

    @property
    def languages(self) -> tuple[str, ...]:
        return self._g2p.languages

    def prepare(self, text: str, language: str) -> list[str]:
        """Clean, normalize and split into sentences (cheap; no phonemes yet)."""
        cleaned = clean_text(text)
        normalize = self._normalizers.get(language, _identity)
        sentences = [normalize(s) for s in split_sentences(cleaned)]
        return [s for s in sentences if any(ch.isalnum() for ch in s)]

    def plan(self, text: str, language: str, *, fast_start: bool = False) -> Iterator[Chunk]:
        sentences = self.prepare(text, language)
        if not sentences:
            raise InvalidInput(
                "the text contains nothing that can be spoken", field="text", value=len(text)
            )
        if fast_start:
            sentences = first_chunk_for_streaming(sentences)
        index = 0
        for sentence in sentences:
            for piece in split_for_budget(sentence, self._measure(language), self._budget):
                phonemes = self._g2p.phonemize(piece, language)
                ids = self._g2p.token_ids(phonemes)
                if not ids or not any(ch.isalpha() for ch in phonemes):
                    continue
                # A few languages' espeak output runs long; cut rather than fail.
                ids = ids[: self._budget]
                yield Chunk(index, piece, phonemes, ids, sentence_pause_s(piece))
                index += 1

    def _measure(self, language: str) -> Callable[[str], int]:
        def count(piece: str) -> int:
            return len(self._g2p.token_ids(self._g2p.phonemize(piece, language)))

        return count
