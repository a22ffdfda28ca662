"""Text → model-sized phoneme chunks, lazily, in speaking order.

The plan is a generator so that a book chapter never exists as a list of
audio-sized intermediate objects: each chunk is phonemized just before it is
synthesized. Chunks are cut at sentence boundaries, then at clauses when a
sentence exceeds the model's phoneme budget.

A sentence may switch language ("Say こんにちは to her"): it is cut into
runs of one language each, every run is normalized and phonemized by its
own language's rules, and the phonemes are joined again so the sentence is
still spoken in one breath by one voice.

Inline phonemes (``[tomato](/təˈmɑːtoʊ/)``, the convention Kokoro-FastAPI
clients use; SSML ``<phoneme>`` becomes the same form) are taken out of the
text after cleaning and replaced by one private-use character each, which
normalization, sentence splitting and budget cutting leave alone; when a
piece is phonemized, the text around each of them goes to the G2P and the
character itself becomes the given IPA in the engine's alphabet. IPA with
no sound the engine speaks is refused while the text is prepared, before any
audio (synth/text/inline_phonemes.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from voxclone.errors import InvalidInput, UnsupportedLanguage
from voxclone.synth.text.inline_phonemes import (
    INLINE_PHONEME,
    UnspeakablePhonemes,
    check_speakable,
    inline_words,
    unspeakable_detail,
)
from voxclone.synth.text.langdetect import detect_language, split_language_runs
from voxclone.synth.text.lexicon import Lexicon
from voxclone.synth.text.normalize_en import normalize_english
from voxclone.synth.text.normalize_intl import international_normalizers
from voxclone.synth.text.protocol import G2P, IpaInput
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
# Time to first audio is one engine call on the first chunk, about 0.19 s plus
# 12.5 ms per token on the 2-thread fast lane (measured 2026-12-02: 6 tokens
# 0.26 s, 19 tokens 0.39 s, 27 tokens 0.51 s), so a streamed first chunk is cut
# at a clause or after this many words; studies/first_chunk.py measures TTFA and
# the streamed WER of 3 against 4 words.
STREAM_FIRST_CHUNK_WORDS = 3
# ... but never so that the rest of the first sentence is shorter than this: a
# one-word chunk ("expected.") is the least intelligible piece Kokoro speaks.
# Two words are heard as well as three (a voice agent's two-word head, 12
# answers through Whisper, 2026-12-07); with three, a voice agent's five-word
# clause after its head ("checked the weather for you,") rendered whole, 0.84-0.93 s
# on one thread behind the head's 0.66 s of audio: at 2 sessions its listener
# heard 0.13-0.24 s of silence there (server trace, 2026-12-07).
STREAM_MIN_TAIL_WORDS = 2
# ... and fewer words (down to STREAM_FIRST_CHUNK_MIN_WORDS) when those three
# hold more phoneme tokens than this: the engine's time follows tokens, not
# words. Three ordinary words are 13-18 tokens (the bench paragraphs' first
# chunks); three long ones ("Internationally recognized researchers") ~40,
# which is 0.3 s more before the first audio at 12.5 ms a token.
STREAM_FIRST_CHUNK_TOKENS = 20
STREAM_FIRST_CHUNK_MIN_WORDS = 2


# Private-use code points stand for the inline phonemes of one request.
_MARK_BASE = 0xE000
_MAX_MARKS = 6400
_MARK = re.compile("([\ue000-\uf8ff])")


@dataclass(frozen=True)
class _Marks:
    """The inline phonemes of one text: (word, IPA) per private-use character."""

    entries: list[tuple[str, str]] = field(default_factory=list)

    def add(self, word: str, ipa: str) -> str:
        if len(self.entries) >= _MAX_MARKS:
            return f" {word} "  # past the cap the word is read by the G2P
        self.entries.append((word, ipa))
        return f" {chr(_MARK_BASE + len(self.entries) - 1)} "

    def get(self, mark: str) -> tuple[str, str] | None:
        index = ord(mark) - _MARK_BASE
        return self.entries[index] if 0 <= index < len(self.entries) else None

    def words(self, text: str) -> str:
        """``text`` with each mark back as the word it stands for."""
        if not self.entries:
            return text
        return _MARK.sub(lambda m: (self.get(m.group(1)) or ("",))[0], text)

    def has(self, text: str) -> bool:
        return bool(self.entries) and _MARK.search(text) is not None

    def units(self, text: str) -> int:
        """What ``text`` costs to speak: its characters, each mark counted as
        the IPA it stands for (a 1,500-symbol phoneme string is not one word)."""
        if not self.entries:
            return len(text)
        extra = 0
        for mark in _MARK.findall(text):
            entry = self.get(mark)
            extra += len(entry[1]) - 1 if entry is not None else 0
        return len(text) + extra


def _extract_inline(
    text: str, marks: _Marks, check: Callable[[str, str], None] | None = None
) -> str:
    def replace(match: re.Match[str]) -> str:
        word, ipa = match.group(1).strip(), match.group(2).strip()
        if check is not None:
            check(word, ipa)
        return marks.add(word, ipa)

    return INLINE_PHONEME.sub(replace, text) if "](/" in text else text


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str
    phonemes: str
    token_ids: tuple[int, ...]
    pause_after_s: float
    # What the chunk costs to speak (Marks.units): admission prices requests
    # and the scheduler learns its rate in the same unit.
    units: int = 0


@dataclass(frozen=True)
class Spoken:
    """A text's size as it will be spoken (units: see ``_Marks.units``)."""

    units: int
    first_chunk: int  # the first chunk's units (its first sentence, up to the budget)
    longest_chunk: int


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

    def prepare(self, text: str, language: str, *, lexicon: Lexicon | None = None) -> list[str]:
        """Clean, normalize and split into sentences (cheap; no phonemes yet).

        ``language`` is the default for text whose script does not say
        otherwise; ``"auto"`` detects it from the text.
        """
        _, sentences, marks = self._prepare(text, language, lexicon)
        return [marks.words(s) for s in sentences]

    def spoken_size(self, text: str, language: str, *, lexicon: Lexicon | None = None) -> Spoken:
        """What ``text`` costs to speak, known before any phonemes (cheap: about
        what :meth:`prepare` costs): the characters of its sentences after the
        lexicon and normalization (numbers read as words), each inline phoneme
        counted as its IPA, with its first and longest sentence (a chunk is a
        sentence, or a budget-sized piece of a longer one). Admission prices
        a request with it."""
        _, sentences, marks = self._prepare(text, language, lexicon)
        sizes = [min(marks.units(s), self._budget) for s in sentences] or [0]
        return Spoken(sum(marks.units(s) for s in sentences), sizes[0], max(sizes))

    def plan(
        self,
        text: str,
        language: str,
        *,
        fast_start: bool = False,
        lexicon: Lexicon | None = None,
    ) -> Iterator[Chunk]:
        """Chunks of ``text``; ``lexicon`` (the caller's pronunciations for
        ``language``) rewrites its words before normalization."""
        language, sentences, marks = self._prepare(text, language, lexicon)
        if not sentences:
            raise InvalidInput(
                "the text contains nothing that can be spoken", field="text", value=len(text)
            )
        if fast_start:
            sentences = first_chunk_for_streaming(
                sentences,
                max_words=self._first_chunk_words(sentences[0], language, marks),
                min_tail_words=STREAM_MIN_TAIL_WORDS,
            )
        return self._chunks(sentences, language, marks)

    def _first_chunk_words(self, sentence: str, language: str, marks: _Marks) -> int:
        """Words in a stream's first chunk: STREAM_FIRST_CHUNK_WORDS, fewer while
        they exceed STREAM_FIRST_CHUNK_TOKENS (never below the minimum)."""
        words = sentence.split()
        count = STREAM_FIRST_CHUNK_WORDS
        if len(words) <= count:
            return count  # no cut is made anyway: skip the G2P
        while count > STREAM_FIRST_CHUNK_MIN_WORDS and (
            self._token_count(" ".join(words[:count]), language, marks) > STREAM_FIRST_CHUNK_TOKENS
        ):
            count -= 1
        return count

    def _token_count(self, text: str, language: str, marks: _Marks) -> int:
        """Engine tokens of ``text`` (the head of a normalized sentence)."""
        pieces = self._phonemized_pieces(text, language, marks)
        return sum(len(self._g2p.token_ids(phonemes)) for _, phonemes in pieces)

    def _chunks(self, sentences: list[str], language: str, marks: _Marks) -> Iterator[Chunk]:
        index = 0
        for sentence in sentences:
            for piece, phonemes in self._phonemized_pieces(sentence, language, marks):
                ids = self._g2p.token_ids(phonemes)
                if not ids or not any(ch.isalpha() for ch in phonemes):
                    continue
                # A few languages' espeak output runs long; cut rather than fail.
                ids = ids[: self._budget]
                text = marks.words(piece)
                yield Chunk(
                    index, text, phonemes, ids, sentence_pause_s(text), units=marks.units(piece)
                )
                index += 1

    def _prepare(
        self, text: str, language: str, lexicon: Lexicon | None = None
    ) -> tuple[str, list[str], _Marks]:
        cleaned = clean_text(text)
        marks = _Marks()
        if language == AUTO:
            language = self._detect(inline_words(cleaned))
        cleaned = _extract_inline(cleaned, marks, self._ipa_check(language))
        if lexicon:
            # After the inline phonemes: a word the text spells out itself wins.
            cleaned = lexicon.apply(cleaned, self._lexicon_mark(marks, language))
        self._check_supported(language)
        sentences = []
        for sentence in split_sentences(cleaned):
            runs = self._runs(sentence, language)
            normalized = " ".join(
                self._normalizers.get(lang, _identity)(run).strip() for lang, run in runs
            )
            if any(ch.isalnum() for ch in normalized) or marks.has(normalized):
                sentences.append(normalized.strip())
        return language, sentences, marks

    def check_ipa(self, word: str, ipa: str, language: str) -> None:
        """Raise UnspeakablePhonemes when ``ipa`` has no sound this engine speaks
        in ``language``; nothing to check for an engine that says the word instead."""
        check = self._ipa_check(language)
        if check is not None:
            check(word, ipa)

    def _lexicon_mark(self, marks: _Marks, language: str) -> Callable[[str, str], str]:
        """``marks.add`` for lexicon entries, refusing one that would say nothing.

        Entries are checked when written (service/lexicon_check.py); one written
        before that check, or for another engine, must still not become silence
        (issue 45: an emoji-only IPA entry spoke a 44-byte WAV)."""
        check = self._ipa_check(language)

        def add(word: str, ipa: str) -> str:
            if check is not None:
                try:
                    check(word, ipa)
                except UnspeakablePhonemes as exc:
                    raise UnspeakablePhonemes(
                        f"your lexicon entry for '{word[:40]}' ({language}) has no sound this "
                        f"engine can speak ({unspeakable_detail(exc)}); replace it with "
                        "POST /v1/lexicon",
                        field="lexicon",
                        value=ipa[:200],
                        limit=exc.limit,
                    ) from None
            return marks.add(word, ipa)

        return add

    def _ipa_check(self, language: str) -> Callable[[str, str], None] | None:
        """What refuses inline IPA that would say nothing (before any audio);
        None for an engine that speaks the word instead of IPA."""
        g2p = self._g2p
        if not isinstance(g2p, IpaInput):
            return None

        def check(word: str, ipa: str) -> None:
            phonemes = g2p.from_ipa(ipa, language)
            check_speakable(word, ipa, phonemes, lambda ch: bool(self._g2p.token_ids(ch)))

        return check

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

    def _phonemize(self, text: str, language: str, marks: _Marks) -> str:
        """The G2P's phonemes for ``text``, with each inline-phoneme mark as its IPA."""
        if not marks.has(text):
            return self._g2p.phonemize(text, language)
        parts: list[str] = []
        for part in _MARK.split(text):
            entry = marks.get(part) if len(part) == 1 else None
            if entry is None:
                phonemes = self._g2p.phonemize(part, language) if part.strip() else ""
            elif isinstance(self._g2p, IpaInput):
                phonemes = self._g2p.from_ipa(entry[1], language)
            else:  # an engine that reads text cannot be given IPA: say the word
                phonemes = self._g2p.phonemize(entry[0], language) if entry[0] else ""
            if phonemes and parts and not phonemes[0].isalpha():
                parts[-1] += phonemes  # punctuation after a mark keeps its place
            elif phonemes:
                parts.append(phonemes)
        return " ".join(parts)

    def _phonemized_pieces(
        self, sentence: str, language: str, marks: _Marks
    ) -> Iterator[tuple[str, str]]:
        """(text, phonemes) pieces of one normalized sentence, each within the token budget."""
        memo: dict[tuple[str, str], str] = {}

        def phonemize(piece: str, lang: str) -> str:
            key = (piece, lang)
            if key not in memo:
                memo[key] = self._phonemize(piece, lang, marks)
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
