"""A dialogue job's word timings, kept beside its audio in the blob store.

A job queued with words wanted (an audiobook's chapter: service/audiobooks.py)
records each word it speaks, in seconds of its own audio, with the turn that
says it. They go to a blob of their own, ``<audio key>.words.json``, not into
the job's row: a chapter of an hour holds ~9,000 words (~400 kB of JSON) that
the row, listed and polled, need not carry. The key starts with the audio's,
so every path that deletes a job's audio (``delete_prefix`` of its key:
delete, expiry, revocation, an orphan after a lost lease) deletes its words.

Rows are ``[word, start_s, end_s, turn]`` (ms precision); who speaks and in
which voice is the turn's, read from the job's payload. ``untimed`` lists the
turns spoken without words (their engine cannot time words).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from voxclone.service.dialogue import SpeakerWord

WORDS_SUFFIX = ".words.json"
WORDS_CONTENT_TYPE = "application/json"


@dataclass(frozen=True)
class JobWord:
    word: str
    start_s: float
    end_s: float
    turn: int


@dataclass(frozen=True)
class JobWords:
    words: tuple[JobWord, ...]
    untimed: tuple[int, ...] = ()


def words_key(audio_key: str) -> str:
    return audio_key + WORDS_SUFFIX


def dump_words(words: Sequence[SpeakerWord], untimed: Sequence[int]) -> bytes:
    rows = [[w.word, round(w.start_s, 3), round(w.end_s, 3), w.turn] for w in words]
    return json.dumps({"words": rows, "untimed": list(untimed)}, separators=(",", ":")).encode()


def load_words(data: bytes) -> JobWords:
    raw: dict[str, Any] = json.loads(data)
    return JobWords(
        tuple(JobWord(str(w), float(s), float(e), int(t)) for w, s, e, t in raw["words"]),
        tuple(int(i) for i in raw.get("untimed", ())),
    )
