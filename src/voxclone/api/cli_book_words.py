"""``voxclone audiobook --words FILE``: the book's words on the M4B's clock, one file.

Each chapter's words come from ``GET /v1/audiobooks/{id}/chapters/{n}/words
?timeline=book`` (the server serves them a chapter at a time:
service/audiobook_words.py says why); the file's suffix says what is written:
``.json`` the chapters as the route returns them, in a list; ``.srt`` /
``.vtt`` one subtitle track for the whole book, each cue naming its speaker
(the route's own writers, service/dialogue_captions.py), SRT's numbers running
on across chapters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voxclone.errors import InvalidInput

WORD_FORMATS = ("json", "srt", "vtt")


def words_format(path: str) -> str:
    """The format ``path``'s suffix names; InvalidInput (asked before any
    work, so a typo does not cost a render) for any other."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in WORD_FORMATS:
        raise InvalidInput(
            f"--words writes {', '.join('.' + f for f in WORD_FORMATS)} files "
            f"(the suffix picks the format), not {Path(path).name!r}",
            field="words",
            value=path,
        )
    return suffix


def book_words_text(chapters: Sequence[dict[str, Any]], fmt: str) -> str:
    """The file's text from each chapter's words (the route's JSON, book timeline)."""
    if fmt == "json":
        return json.dumps(list(chapters), indent=2, ensure_ascii=False) + "\n"
    from voxclone.service.dialogue import SpeakerWord
    from voxclone.service.dialogue_captions import speaker_srt, speaker_vtt

    # A cue never spans two turns (dialogue_captions.speaker_cues groups by
    # turn): each chapter's turns are numbered from 0, so they get book-wide
    # numbers here, or a chapter's one-turn end and the next one's first turn
    # would share a cue.
    turns: dict[tuple[int, int], int] = {}
    words = [
        SpeakerWord(
            w["speaker"],
            turns.setdefault((n, int(w["turn"])), len(turns)),
            w["word"],
            float(w["start_s"]),
            float(w["end_s"]),
        )
        for n, chapter in enumerate(chapters)
        for w in chapter["words"]
    ]
    return speaker_srt(words) if fmt == "srt" else speaker_vtt(words)


def fetch_book_words(url: str, book_id: str, chapters: int) -> list[dict[str, Any]]:
    """Each chapter's words on the book's timeline, in order."""
    from voxclone.api.cli_remote import call_json

    return [
        call_json(
            url, "GET", f"/v1/audiobooks/{book_id}/chapters/{n}/words?timeline=book&format=json"
        )
        for n in range(chapters)
    ]
