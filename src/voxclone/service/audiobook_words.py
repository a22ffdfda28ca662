"""A chapter's words with who reads them, in the chapter's time or the book's.

Each chapter's dialogue job records its words (service/job_words.py: seconds
of the chapter's own audio, with the turn). In the book, chapter ``n`` starts
where the assembled M4B's manifest says (``start_s``: the chapters before it,
each followed by ``CHAPTER_GAP_S`` of silence, counted in samples by
``assemble_m4b``), so a word's book time is that start plus its chapter time:
the same clock as the M4B's chapter marks.

Words are served a chapter at a time (``GET
/v1/audiobooks/{id}/chapters/{n}/words``), not in the manifest: a 10-hour book
speaks ~90,000 words, several MB of JSON that a player showing chapter 3
need not fetch, and the manifest (read by ``voxclone audiobook --manifest``)
stays a few kB with each chapter's word count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from voxclone.runtime.job_store import JobRecord
from voxclone.service.dialogue import Dialogue, SpeakerWord
from voxclone.service.job_words import load_words

Timeline = Literal["chapter", "book"]


@dataclass(frozen=True)
class BookWord:
    word: str
    start_s: float  # on the timeline asked for
    end_s: float
    speaker: str  # "Narrator" or the cast character
    voice: str
    turn: int


@dataclass(frozen=True)
class ChapterWords:
    n: int
    title: str
    timeline: Timeline
    start_s: float  # the chapter's start on that timeline (0 on its own)
    words: tuple[BookWord, ...]
    untimed_turns: tuple[int, ...]  # turns spoken without words (their engine cannot time them)

    def to_json(self) -> dict[str, Any]:
        return {
            "chapter": self.n,
            "title": self.title,
            "timeline": self.timeline,
            "start_s": self.start_s,
            "word_count": len(self.words),
            "untimed_turns": list(self.untimed_turns),
            "words": [
                {
                    "word": w.word,
                    "start_s": w.start_s,
                    "end_s": w.end_s,
                    "speaker": w.speaker,
                    "voice": w.voice,
                    # The chapter's turn (its title 0, then a paragraph or a
                    # quote each): a caption never spans two.
                    "turn": w.turn,
                }
                for w in self.words
            ],
        }

    def speaker_words(self) -> list[SpeakerWord]:
        """For the dialogue caption writers (service/dialogue_captions.py)."""
        return [SpeakerWord(w.speaker, w.turn, w.word, w.start_s, w.end_s) for w in self.words]


def chapter_words(
    job: JobRecord, data: bytes, *, n: int, title: str, timeline: Timeline, start_s: float
) -> ChapterWords:
    """Chapter ``n``'s words from its job (``data``: its words blob), shifted
    by ``start_s`` (the chapter's start in the book, or 0)."""
    recorded = load_words(data)
    turns = Dialogue.of_payload(job.payload or {}, job.owner).turns
    words = tuple(
        BookWord(
            w.word,
            round(start_s + w.start_s, 3),
            round(start_s + w.end_s, 3),
            turns[w.turn].label,
            turns[w.turn].voice,
            w.turn,
        )
        for w in recorded.words
    )
    return ChapterWords(n, title, timeline, start_s, words, recorded.untimed)
