"""bench/realtime.py's own arithmetic: where it says the first clause ends is
where the server cuts it, and its real-time player counts underruns."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import realtime  # noqa: E402
from voxclone.service.realtime_text import ClauseBuffer  # noqa: E402


def test_the_first_clause_ends_at_or_after_the_servers_first_cut() -> None:
    """The bench times first audio from the end of the first clause; the
    server may start speaking its first words before (its head)."""
    for i in range(6):
        text = realtime.answer(i)
        buffer = ClauseBuffer()
        sent = ""
        for token in realtime.tokens(text):
            sent += token
            if buffer.add(token):
                break
        assert len(sent) <= realtime.first_clause_end(text), (text, sent)
    # "Sure, I checked the recipe for you," (a clause mark once 3 words are in)
    text = realtime.answer(4)
    assert text[: realtime.first_clause_end(text)] == "Sure, I checked the recipe for you, "


def test_clause_starts_are_where_the_server_cuts() -> None:
    # "Sure, I" (the head) | "checked the recipe for you," | "number 4." |
    # "It looks fine today," | "and nothing needs ..."
    assert realtime.clause_starts(realtime.answer(4)) == {2, 7, 9, 13}


def test_playback_counts_underruns_and_gaps_where_a_clause_begins() -> None:
    # 1 s arrives at 0 and at 0.5 s (3 words each; the second clause starts at
    # word 6); the next at 2.5 s is 0.5 s late (played out at 2.0 s); the last
    # arrives in time.
    arrivals = [(0.0, 1.0, 3), (0.5, 1.0, 3), (2.5, 1.0, 2), (3.0, 0.2, 0)]
    play = realtime.playback(arrivals, {6})
    assert play["underruns"] == 1 and abs(play["stall_s"] - 0.5) < 1e-9
    assert play["clause_gaps_s"] == [0.5] and abs(play["audio_s"] - 3.2) < 1e-9
    assert realtime.playback([], set())["underruns"] == 0
