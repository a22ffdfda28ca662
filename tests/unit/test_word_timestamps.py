"""Word timestamps without a model: token spans → words, words → the original
text, the joiner's placement of a piece, subtitles."""

from __future__ import annotations

import numpy as np

from voxclone.synth.audio.join import PieceJoiner
from voxclone.synth.text.normalize_en import normalize_english
from voxclone.synth.text.wordtimes import (
    OriginalWordMapper,
    WordTime,
    chunk_word_times,
    to_srt,
    to_vtt,
)

SPACE, COMMA = 16, 99


def _times(n: int) -> tuple[np.ndarray, np.ndarray]:
    starts = np.arange(n, dtype=np.float64) * 0.1
    return starts, starts + 0.1


def test_phoneme_words_give_each_text_word_its_span() -> None:
    ids = [1, 2, SPACE, 3, 4, 5, COMMA, SPACE, 6]
    starts, ends = _times(len(ids))
    words = chunk_word_times(
        "ab cde, f", ids, starts, ends, space_id=SPACE, silent_ids=frozenset({COMMA})
    )
    assert [(w.word, round(w.start_s, 2), round(w.end_s, 2)) for w in words] == [
        ("ab", 0.0, 0.2),
        ("cde,", 0.3, 0.6),  # the comma's token is not part of the word
        ("f", 0.8, 0.9),
    ]


def test_merged_phoneme_words_are_shared_in_order() -> None:
    # espeak says "of the world" as two phoneme words ("ʌvðə wɜɹld").
    ids = [1, 2, 3, 4, SPACE, 5, 6, 7, 8, 9]
    starts, ends = _times(len(ids))
    words = chunk_word_times(
        "of the world", ids, starts, ends, space_id=SPACE, silent_ids=frozenset()
    )
    assert [w.word for w in words] == ["of", "the", "world"]
    assert all(a.end_s <= b.start_s + 1e-9 for a, b in zip(words, words[1:], strict=False))
    assert words[2].start_s == starts[5]  # snapped to the phoneme word boundary


def _spoken(text: str, t0: float = 0.0) -> list[WordTime]:
    return [WordTime(w, t0 + i, t0 + i + 0.5) for i, w in enumerate(text.split())]


def test_expanded_numbers_and_abbreviations_keep_the_original_token() -> None:
    mapper = OriginalWordMapper("In 1984, Dr. Smith paid $5.50.", normalize_english)
    spoken = _spoken("In nineteen eighty-four, Doctor Smith paid five dollars and fifty cents.")
    words = [*mapper.feed(spoken), *mapper.finish()]
    assert [w.word for w in words] == ["In", "1984", "Dr", "Smith", "paid", "$5.50"]
    by_word = {w.word: w for w in words}
    assert (by_word["1984"].start_s, by_word["1984"].end_s) == (1, 2.5)  # "nineteen eighty-four"
    assert (by_word["$5.50"].start_s, by_word["$5.50"].end_s) == (6, 10.5)


def test_an_expansion_cut_between_chunks_waits_for_the_next_chunk() -> None:
    mapper = OriginalWordMapper("It costs $5.50 today.")
    first = mapper.feed(_spoken("It costs five dollars"))
    assert [w.word for w in first] == ["It", "costs"]  # "$5.50" is not finished yet
    rest = mapper.feed(_spoken("and fifty cents today.", 10))
    assert [w.word for w in rest] == ["$5.50", "today"]
    assert (rest[0].start_s, rest[0].end_s) == (2, 12.5)
    assert mapper.finish() == []


def test_joiner_reports_where_each_piece_landed() -> None:
    sr = 24_000
    tone = (0.3 * np.sin(np.arange(sr) * 0.05)).astype(np.float32)
    piece = np.concatenate([np.zeros(sr // 2, np.float32), tone, np.zeros(sr // 2, np.float32)])
    joiner = PieceJoiner(sr)
    out = [joiner.feed(piece, 0.5)]
    first_origin = joiner.last_origin
    out.append(joiner.feed(piece, 0.0))
    second_origin = joiner.last_origin
    out.append(joiner.finish())
    audio = np.concatenate(out)
    # The tone (piece sample sr // 2) is where the origin says it is.
    for origin in (first_origin, second_origin):
        at = origin + sr // 2
        assert np.abs(audio[at + 240 : at + 480]).max() > 0.2
        assert np.abs(audio[at - 600 : at - 240]).max() < 1e-3  # its leading pad
    assert second_origin - first_origin > sr  # after the first tone and the pause


def test_subtitles_group_words_into_timed_cues() -> None:
    words = [WordTime("Hello", 0.1, 0.4), WordTime("there", 0.45, 0.8), WordTime("Bye", 2.0, 2.3)]
    srt = to_srt(words)
    assert srt.startswith("1\n00:00:00,100 --> 00:00:00,800\nHello there\n")
    assert "2\n00:00:02,000 --> 00:00:02,300\nBye" in srt
    vtt = to_vtt(words)
    assert vtt.startswith("WEBVTT\n\n00:00:00.100 --> 00:00:00.800\nHello there")
