"""Clause cutting of a voice agent's growing text, and G.711 mu-law (no models)."""

from __future__ import annotations

import numpy as np

from voxclone.service.realtime_audio import char_alignment
from voxclone.service.realtime_text import ClauseBuffer
from voxclone.synth.audio.ulaw import ulaw_decode, ulaw_encode
from voxclone.synth.text.wordtimes import WordTime


def _feed(pieces: list[str], schedule: tuple[int, ...] = (120,)) -> list[list[str]]:
    buf = ClauseBuffer(schedule)
    return [buf.add(p) for p in pieces]


def test_a_sentence_is_cut_when_its_end_arrives() -> None:
    assert _feed(["It works. ", "Next"]) == [["It works."], []]


def test_numbers_and_abbreviations_are_never_split() -> None:
    got = _feed(["Ask Dr. ", "Smith at 3.", "5 past noon. "])
    # The head waits for the word after "Dr." (it is no end of anything).
    assert got == [[], ["Ask Dr. Smith"], ["at 3.5 past noon."]]
    got = _feed(["Well. At 3.", "5 past ", "noon. "])
    assert got == [["Well."], [], ["At 3.5 past noon."]]


def test_the_first_two_words_are_spoken_before_their_clause_ends() -> None:
    got = _feed(["Sure", ", I", " chec", "ked", " the", " weather for you. "])
    assert got == [[], [], ["Sure, I"], [], [], ["checked the weather for you."]]
    # What follows the head may end at a comma, as a first clause may.
    text = "Sure, I checked the weather for you, number 4. It is fine, and the rest. "
    clauses = [
        c for piece in _feed([text[i : i + 4] for i in range(0, len(text), 4)]) for c in piece
    ]
    assert clauses == [
        "Sure, I",
        "checked the weather for you,",
        "number 4.",
        "It is fine, and the rest.",
    ]
    # Only in the first clause: later ones wait for their end.
    assert _feed(["One. ", "two three four five "]) == [["One."], []]


def test_a_comma_ends_a_first_clause_after_three_words_a_later_one_after_four() -> None:
    got = _feed(["Hi, ", "well, I looked into it, ", "and then, later, it was done. "])
    assert got == [[], ["Hi, well, I looked into it,"], ["and then, later, it was done."]]
    # A later sentence arriving whole is still cut at its comma: its first
    # part renders while the audio before it plays (bench/realtime.py).
    got = _feed(["Done. ", "It looks fine today, and nothing needs to change. "])
    assert got == [["Done."], ["It looks fine today,", "and nothing needs to change."]]


def test_schedule_cuts_long_text_at_a_word() -> None:
    (clauses,) = _feed(["word " * 30], schedule=(50,))
    assert clauses and all(len(c) <= 50 and not c.endswith("wor") for c in clauses)


def test_flush_speaks_the_rest() -> None:
    buf = ClauseBuffer()
    assert buf.add("no end yet") == ["no end"]  # the head
    assert buf.flush() == ["yet"] and not buf.pending


def test_ulaw_matches_the_reference_and_round_trips() -> None:
    x = (np.random.default_rng(0).uniform(-1, 1, 4000) ** 3).astype(np.float32)
    assert np.abs(ulaw_decode(ulaw_encode(x)) - x).max() < 0.03
    assert ulaw_encode(np.array([0.0, 1.0, -1.0], np.float32)) == bytes([0xFF, 0x80, 0x00])


def test_alignment_spreads_word_times_over_characters() -> None:
    words = [WordTime("Hi", 0.1, 0.3), WordTime("there", 0.4, 0.9)]
    a = char_alignment(words, offset_s=0.0)
    assert a is not None
    assert "".join(str(c) for c in a["chars"]) == "Hi there"
    assert a["charStartTimesMs"][0] == 100 and a["charStartTimesMs"][3] == 400
