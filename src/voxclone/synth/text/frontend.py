"""Text → model-sized phoneme chunks, lazily, in speaking order.

The plan is a generator so that a book chapter never exists as a list of
audio-sized intermediate objects: each chunk is phonemized just before it is
synthesized. Chunks are cut at sentence boundaries, then at clauses when a
sentence exceeds the model's phoneme budget.

A sentence may switch language ("Say こんにちは to her"): it is cut into
runs of one language each, every run is normalized and phonemized by its
own language's rules, and the phonemes are joined again so the sentence is
still spoken in one breath by one voice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from voxclone.errors import InvalidInput, UnsupportedLanguage
from voxclone.synth.text.langdetect import detect_language, split_language_runs
from voxclone.synth.text.normalize_en import normalize_english
from voxclone.synth.text.normalize_intl import international_normalizers
from voxclone.synth.text.protocol import G2P
from voxclone.synth.text.segment import (
    clean_text,
    first_chunk_for_streaming,
    sentence_pause_s,
    split_for_budget,
    split_sentences,
)

Normalizer = Callable[[str], str]
RunSplitter = Callable[[str, str], list[tuple[str, str]]]

AUTO = "auto"
# Time to first audio is one engine call on the first chunk (0.73 s for 5 words
# on the scheduler's 2-thread fast lane; the built-in voices speak ~2.3 words/s
# with edge silence), so a streamed first chunk is cut at a clause or after this
# many words. bench/ttfa.py: p50 0.74 s at 4 words vs 0.97 s at 5 in one run.
STREAM_FIRST_CHUNK_WORDS = 4


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
        g2p: G2P,
        *,
        max_tokens: int,
        normalizers: dict[str, Normalizer] | None = None,
        split_runs: RunSplitter = split_language_runs,
        detect: Callable[[str], str] = detect_language,
    ) -> None:
        self._g2p = g2p
        # Leave headroom: the model's style pack holds one row per length and
        # espeak sometimes inserts a symbol or two at piece boundaries.
        self._budget = max_tokens - 10
        self._normalizers: dict[str, Normalizer] = {
            "en-us": normalize_english,
            "en-gb": normalize_english,
            **international_normalizers(),
        }
        if normalizers:
            self._normalizers.update(normalizers)
        self._split_runs = split_runs
        self._detect = detect

    @property
    def languages(self) -> tuple[str, ...]:
        return self._g2p.languages

    def token_ids(self, units: str) -> tuple[int, ...]:
        """The engine vocabulary's ids of ``units`` (word timestamps find spaces with it)."""
        return self._g2p.token_ids(units)

    def normalizer(self, language: str) -> Normalizer:
        """How ``language``'s text is normalized for speech (identity if it is not)."""
        return self._normalizers.get(language, _identity)

    def prepare(self, text: str, language: str) -> list[str]:
        """Clean, normalize and split into sentences (cheap; no phonemes yet).

        ``language`` is the default for text whose script does not say
        otherwise; ``"auto"`` detects it from the text.
        """
        return self._prepare(text, language)[1]

    def plan(self, text: str, language: str, *, fast_start: bool = False) -> Iterator[Chunk]:
        language, sentences = self._prepare(text, language)
        if not sentences:
            raise InvalidInput(
                "the text contains nothing that can be spoken", field="text", value=len(text)
            )
        if fast_start:
            sentences = first_chunk_for_streaming(sentences, max_words=STREAM_FIRST_CHUNK_WORDS)
        return self._chunks(sentences, language)

    def _chunks(self, sentences: list[str], language: str) -> Iterator[Chunk]:
        index = 0
        for sentence in sentences:
            for piece, phonemes in self._phonemized_pieces(sentence, language):
                ids = self._g2p.token_ids(phonemes)
                if not ids or not any(ch.isalpha() for ch in phonemes):
                    continue
                # A few languages' espeak output runs long; cut rather than fail.
                ids = ids[: self._budget]
                yield Chunk(index, piece, phonemes, ids, sentence_pause_s(piece))
                index += 1

    def _prepare(self, text: str, language: str) -> tuple[str, list[str]]:
        cleaned = clean_text(text)
        if language == AUTO:
            language = self._detect(cleaned)
        self._check_supported(language)
        sentences = []
        for sentence in split_sentences(cleaned):
            runs = self._runs(sentence, language)
            normalized = " ".join(
                self._normalizers.get(lang, _identity)(run).strip() for lang, run in runs
            )
            if any(ch.isalnum() for ch in normalized):
                sentences.append(normalized.strip())
        return language, sentences

    def _runs(self, sentence: str, language: str) -> list[tuple[str, str]]:
        runs = self._split_runs(sentence, language) or [(language, sentence)]
        for run_language, _ in runs:
            self._check_supported(run_language)
        return runs

    def _check_supported(self, language: str) -> None:
        if language not in self.languages:
            supported = sorted(self.languages)
            raise UnsupportedLanguage(
                f"language '{language[:16]}' is not supported; supported: {', '.join(supported)}",
                field="language",
                limit=supported,
            )

    def _phonemized_pieces(self, sentence: str, language: str) -> Iterator[tuple[str, str]]:
        """(text, phonemes) pieces of one normalized sentence, each within the token budget."""
        memo: dict[tuple[str, str], str] = {}

        def phonemize(piece: str, lang: str) -> str:
            key = (piece, lang)
            if key not in memo:
                memo[key] = self._g2p.phonemize(piece, lang)
            return memo[key]

        def pieces_of(text: str, lang: str) -> Iterator[tuple[str, str]]:
            def count(piece: str) -> int:
                return len(self._g2p.token_ids(phonemize(piece, lang)))

            for piece in split_for_budget(text, count, self._budget):
                yield piece, phonemize(piece, lang)

        runs = self._runs(sentence, language)
        if len(runs) == 1:
            yield from pieces_of(sentence, runs[0][0])
            return
        # Mixed languages: keep the sentence whole when it fits, so the switch
        # costs no pause; otherwise each run is cut on its own.
        parts = [phonemize(run.strip(), lang) for lang, run in runs]
        joined = " ".join(p for p in parts if p)
        if len(self._g2p.token_ids(joined)) <= self._budget:
            yield sentence, joined
            return
        for lang, run in runs:
            yield from pieces_of(run, lang)
