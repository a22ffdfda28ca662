"""Word timestamps: token durations → spoken words → the caller's original words.

Two steps, both cheap and model-free:

1. :func:`chunk_word_times` splits a chunk's token ids at the space token into
   phoneme words and gives each word of the chunk's (normalized) text the time
   span of its phoneme word. espeak sometimes merges words ("of the" →
   "ʌvðə") or splits one: then the words share the chunk's speech tokens in
   proportion to their letters, snapped to a phoneme-word boundary when one
   is near.
2. :class:`OriginalWordMapper` maps spoken words back to the text the caller
   sent, so "nineteen eighty-four" is reported as "1984" and "Doctor" as
   "Dr.": both sides are aligned on lower-cased letters and digits
   (difflib); an expanded group becomes one timestamp spanning its words. It
   works chunk by chunk (for streaming) and holds back only an unmatched run
   at a chunk's end, which the next chunk may still continue.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from voxclone.synth.text.inline_phonemes import inline_words

# Stripped from a reported word's ends; symbols that are read aloud stay
# ("$5", "50%", "#1").
_EDGE_PUNCT = "\"'()[]{}<>.,;:!?¡¿…“”‘’«»—–-*_/\\|~`^"
_SNAP_TOKENS = 2


@dataclass(frozen=True)
class WordTime:
    word: str
    start_s: float
    end_s: float


def _key(word: str) -> str:
    return "".join(ch for ch in word.lower() if ch.isalnum())


def chunk_word_times(
    text: str,
    token_ids: Sequence[int],
    starts_s: np.ndarray,
    ends_s: np.ndarray,
    *,
    space_id: int,
    silent_ids: frozenset[int],
) -> list[WordTime]:
    """Times (in the chunk's audio) of the words of ``text``, the chunk's normalized text.

    ``silent_ids``: punctuation tokens, which belong to no word.
    """
    words = [w for w in text.split() if _key(w)]
    if not words or len(token_ids) == 0:
        return []
    n = min(len(token_ids), len(starts_s), len(ends_s))
    # Phoneme words: runs of speech tokens between spaces, as [first, last] token.
    spans: list[tuple[int, int]] = []
    current: list[int] = []
    for i in range(n):
        tok = token_ids[i]
        if tok == space_id:
            if current:
                spans.append((current[0], current[-1]))
                current = []
        elif tok not in silent_ids:
            current.append(i)
    if current:
        spans.append((current[0], current[-1]))
    if not spans:
        return []
    if len(spans) == len(words):
        return [
            WordTime(w, float(starts_s[a]), float(ends_s[b]))
            for w, (a, b) in zip(words, spans, strict=True)
        ]
    return _proportional(words, spans, starts_s, ends_s)


def _proportional(
    words: list[str], spans: list[tuple[int, int]], starts_s: np.ndarray, ends_s: np.ndarray
) -> list[WordTime]:
    """Share the speech tokens among the words by their letter counts."""
    speech = [i for a, b in spans for i in range(a, b + 1)]
    word_starts = {a for a, _ in spans}
    weights = np.array([max(1, len(_key(w))) for w in words], dtype=np.float64)
    cuts = np.concatenate([[0.0], np.cumsum(weights) / weights.sum()]) * len(speech)
    m = len(speech)
    starts = [k for k in range(m) if speech[k] in word_starts]
    bounds = [0]
    for n, cut in enumerate(cuts[1:-1], 1):
        at = int(round(cut))
        # Snap to a phoneme word's first token when one is close.
        best = min(starts, key=lambda k: abs(k - cut))
        if abs(best - cut) <= _SNAP_TOKENS:
            at = best
        # Every word keeps at least one token while there are enough.
        bounds.append(max(bounds[-1] + 1, min(at, m - (len(words) - n))))
    bounds.append(m)
    out = []
    for w, lo, hi in zip(words, bounds[:-1], bounds[1:], strict=True):
        first = speech[min(lo, m - 1)]
        last = speech[min(max(hi - 1, lo), m - 1)]
        out.append(WordTime(w, float(starts_s[first]), float(ends_s[last])))
    return out


def _clean(token: str) -> str:
    return token.strip(_EDGE_PUNCT) or token


class OriginalWordMapper:
    """Maps spoken (normalized) words with times back onto the original text's words."""

    def __init__(self, original: str, expand: Callable[[str], str] | None = None) -> None:
        # ``expand``: the language's normalizer, to share an expanded run
        # ("1984, Dr." → "nineteen eighty-four, Doctor") among its words.
        self._expand = expand
        # An inline phoneme is its word on screen: "tomato", not
        # "tomato](/təˈmɑːtoʊ" (the markup split at its spaces, edges stripped).
        self._orig = [t for t in inline_words(original).split() if _key(t)]
        self._keys = [_key(t) for t in self._orig]
        self._cursor = 0  # first original word not yet reported
        self._pending: list[WordTime] = []  # spoken words not matched yet

    def feed(self, spoken: Iterable[WordTime]) -> list[WordTime]:
        """The original words that ``spoken`` (one chunk's words, in order) completes."""
        words = [*self._pending, *spoken]
        self._pending = []
        if not words:
            return []
        window = self._keys[self._cursor : self._cursor + 2 * len(words) + 8]
        matcher = difflib.SequenceMatcher(None, window, [_key(w.word) for w in words], False)
        ops = matcher.get_opcodes()
        # An unmatched run at the chunk's end may continue in the next chunk.
        while ops and ops[-1][0] != "equal":
            tag, _i1, _i2, j1, j2 = ops.pop()
            if tag != "delete":
                self._pending = words[j1:j2] + self._pending
        out: list[WordTime] = []
        consumed = 0
        for tag, i1, i2, j1, j2 in ops:
            out.extend(self._group(i1, i2, words[j1:j2], out))
            consumed = i2
            del tag
        self._cursor += consumed
        return out

    def finish(self) -> list[WordTime]:
        """Whatever is still pending takes the remaining original words."""
        words, self._pending = self._pending, []
        if not words:
            return []
        out = self._group(0, len(self._orig) - self._cursor, words, [])
        self._cursor = len(self._orig)
        return out

    def _group(
        self, i1: int, i2: int, spoken: list[WordTime], before: list[WordTime]
    ) -> list[WordTime]:
        originals = self._orig[self._cursor + i1 : self._cursor + i2]
        if not spoken:
            return []  # written but not spoken (nothing to time)
        if len(originals) == len(spoken):
            return [
                WordTime(_clean(o), s.start_s, s.end_s)
                for o, s in zip(originals, spoken, strict=True)
            ]
        if not originals:
            # Spoken words the text did not have (a normalizer's addition):
            # they lengthen the word before them.
            if before:
                last = before.pop()
                return [WordTime(last.word, last.start_s, spoken[-1].end_s)]
            return [WordTime(" ".join(s.word for s in spoken), spoken[0].start_s, spoken[-1].end_s)]
        counts = self._expanded_counts(originals)
        if counts is not None and sum(counts) == len(spoken):
            out, at = [], 0
            for o, c in zip(originals, counts, strict=True):
                out.append(WordTime(_clean(o), spoken[at].start_s, spoken[at + c - 1].end_s))
                at += c
            return out
        joined = " ".join(_clean(o) for o in originals)
        return [WordTime(joined, spoken[0].start_s, spoken[-1].end_s)]

    def _expanded_counts(self, originals: list[str]) -> list[int] | None:
        if self._expand is None or len(originals) < 2:
            return None
        try:
            counts = [len([w for w in self._expand(o).split() if _key(w)]) for o in originals]
        except Exception:  # a normalizer choking on a lone token: keep the group whole
            return None
        return counts if all(counts) else None


def _stamp(seconds: float, sep: str) -> str:
    ms = int(round(max(0.0, seconds) * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def subtitle_cues(
    words: Sequence[WordTime], *, max_words: int = 7, max_gap_s: float = 0.6
) -> list[WordTime]:
    """Words grouped into cues: a new cue after ``max_words`` or a pause."""
    cues: list[list[WordTime]] = []
    for w in words:
        if cues and len(cues[-1]) < max_words and w.start_s - cues[-1][-1].end_s <= max_gap_s:
            cues[-1].append(w)
        else:
            cues.append([w])
    return [WordTime(" ".join(x.word for x in c), c[0].start_s, c[-1].end_s) for c in cues]


def to_srt(words: Sequence[WordTime]) -> str:
    lines = []
    for n, cue in enumerate(subtitle_cues(words), 1):
        lines += [str(n), f"{_stamp(cue.start_s, ',')} --> {_stamp(cue.end_s, ',')}", cue.word, ""]
    return "\n".join(lines)


def to_vtt(words: Sequence[WordTime]) -> str:
    lines = ["WEBVTT", ""]
    for cue in subtitle_cues(words):
        lines += [f"{_stamp(cue.start_s, '.')} --> {_stamp(cue.end_s, '.')}", cue.word, ""]
    return "\n".join(lines)
