"""A voice agent's text as it arrives: a growing buffer cut into clauses to speak.

The cut rules, in order:

* a sentence end (``split_sentences``' own rules: "Dr. Smith", "3.5" and
  "e.g. the" are no ends) as soon as the word after it, or the whitespace
  that says the sentence is over, has arrived;
* a clause mark (``, ; : —``) followed by whitespace, before the sentence's
  end, once three words are in (a context's first clause, and the one after
  its head: at 15 tokens/s, waiting for the sentence's end left 0.8 s of
  silence after the head) or four (later clauses: "and then, later," stays
  whole). A later sentence rendered whole behind a short clause came up to
  1 s after that clause had played out (its render, ~0.42 s per second of
  audio on both cores, is longer than a short clause's audio); cut at its
  comma, its first part renders in time (bench/realtime.py, 2026-12-07);
* for a context's first clause only, its first two words as soon as they
  are complete (whitespace after the second) and no clause end came with
  them: an LLM's first clause is still arriving, so their render starts a
  few tokens before the clause ends (its *head*);
* the client's ``chunk_length_schedule``: once the buffer is that long it is
  cut at its last clause mark, else its last space — never inside a word or
  a number;
* ``flush`` / the end of input / an idle pause: everything left.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from voxclone.synth.text.segment import split_sentences

# ElevenLabs' default schedule (characters before the 1st, 2nd, ... generation).
DEFAULT_SCHEDULE: tuple[int, ...] = (120, 160, 250, 290)
# ElevenLabs accepts 50..500 per entry; shorter cuts would split most clauses.
MIN_SCHEDULE_CHARS = 50
MAX_SCHEDULE_CHARS = 500
# Words a first clause needs before a comma may end it (shorter: choppy prosody).
FIRST_CLAUSE_MIN_WORDS = 3
# Words a later clause needs before a comma may end it: "and then, later,"
# stays whole.
LATER_CLAUSE_MIN_WORDS = 4
# Words of a context's first clause spoken before the clause ends. The render
# follows the audio's length: "Sure, I" (0.66 s) reached one session 0.24 s
# after its clause ended, "Sure, I checked" (0.82 s) 0.43 s (30 tokens/s,
# p50 of 3, 2 cores); 12 answers through a session, Whisper tiny.en: the same
# words heard with a two- or a three-word head (1 slip each; 2026-12-07).
HEAD_WORDS = 2

_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)")
_CLAUSE_MARK = re.compile(r"[,;:—–][\"'”’)\]]*(?=\s)")
# A capitalised word that is no sentence starter and no abbreviation: what
# split_sentences is shown after a terminator when the next word has not come.
_PROBE = "Zqx"


def _has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _ends_sentence(buf: str, end: int) -> bool | None:
    """Whether the terminator ending at ``end`` closes a sentence; None while
    the word after it is still arriving."""
    rest = buf[end:]
    after = rest.lstrip()
    if after:
        word = after.split(None, 1)[0]
        complete = len(after) > len(word)  # whitespace after it: the word is whole
        if not complete and not word[:1].isupper():
            return None  # "e.g. th…" may still turn into anything
        probe = word
    else:
        probe = _PROBE
    sentences = split_sentences(buf[:end] + " " + probe)
    return len(sentences) >= 2 and sentences[-1] == probe


def _head_end(buf: str, words: int) -> int | None:
    """Where ``buf``'s first ``words`` words end, once the last of them is
    complete (whitespace follows it); None before that. A word ending in a
    full stop that ended no sentence ("Dr.", "3.") does not end the head: the
    word after it joins (an abbreviation or number read alone may be read
    otherwise); at most ``words`` more are tried."""
    seen = 0
    for match in re.finditer(r"\S+", buf):
        if match.end() == len(buf) or seen >= 2 * words:
            return None  # the word is still arriving
        if _has_words(match.group()):
            seen += 1
        if seen >= words and not match.group().endswith("."):
            return match.end()
    return None


class ClauseBuffer:
    """Collects text pieces and says which clauses are ready to speak."""

    def __init__(self, schedule: Sequence[int] = DEFAULT_SCHEDULE) -> None:
        values = [min(max(int(v), MIN_SCHEDULE_CHARS), MAX_SCHEDULE_CHARS) for v in schedule]
        self._schedule = tuple(values) or DEFAULT_SCHEDULE
        self._buf = ""
        self._cut = 0  # clauses cut so far (the head not counted)
        self._head: str | None = None  # the first words, gone ahead of their clause

    @property
    def pending(self) -> bool:
        """True when text with words waits to be spoken."""
        return _has_words(self._buf)

    def is_head(self, clause: str) -> bool:
        """Whether ``clause`` (just returned by :meth:`add`) is the head."""
        return self._head is not None and clause is self._head

    def add(self, text: str) -> list[str]:
        """Append ``text``; return the clauses it completed."""
        self._buf += text
        out: list[str] = []
        while (clause := self._next()) is not None:
            out.append(clause)
        return out

    def flush(self) -> list[str]:
        """Everything left, as one clause (none when it has no words)."""
        rest, self._buf = self._buf.strip(), ""
        if not _has_words(rest):
            return []
        self._cut += 1
        return [rest]

    def _take(self, end: int, *, head: bool = False) -> str | None:
        clause, rest = self._buf[:end].strip(), self._buf[end:]
        if not _has_words(clause):
            return None
        self._buf = rest.lstrip() if not _has_words(rest) else rest
        if head:
            self._head = clause
        else:
            self._cut += 1
        return clause

    def _next(self) -> str | None:
        buf = self._buf
        sentence_end: int | None = None
        for match in _SENTENCE_END.finditer(buf):
            verdict = _ends_sentence(buf, match.end())
            if verdict is None:
                break
            if verdict and _has_words(buf[: match.end()]):
                sentence_end = match.end()
                break
        # A clause mark before the sentence's end ends a clause once enough
        # words are before it (a first clause: 3, later ones: 4).
        least = FIRST_CLAUSE_MIN_WORDS if self._cut == 0 else LATER_CLAUSE_MIN_WORDS
        for match in _CLAUSE_MARK.finditer(buf, 0, sentence_end or len(buf)):
            if len(buf[: match.start()].split()) >= least:
                return self._take(match.end())
        if sentence_end is not None:
            return self._take(sentence_end)
        if self._cut == 0:
            head = None if self._head is not None else _head_end(buf, HEAD_WORDS)
            if head is not None:
                return self._take(head, head=True)
        limit = self._schedule[min(self._cut, len(self._schedule) - 1)]
        if len(buf.strip()) >= limit:
            marks = [m.end() for m in _CLAUSE_MARK.finditer(buf, 0, limit + 1)]
            if marks:
                return self._take(marks[-1])
            space = buf.rfind(" ", 0, limit + 1)
            # The last whole word before the limit (a longer run of non-spaces
            # is one token, a URL or a number: never split).
            if space > 0:
                return self._take(space)
        return None
