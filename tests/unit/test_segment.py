"""Text segmentation: cleaning, sentence splitting, budget splitting, streaming, pauses."""

from __future__ import annotations

import random
import time

import pytest

from voxclone.errors import InvalidInput
from voxclone.synth.text.segment import (
    clean_text,
    first_chunk_for_streaming,
    sentence_pause_s,
    split_for_budget,
    split_paragraphs,
    split_sentences,
)

# -----------------------------------------------------------------------------
# clean_text
# -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("Hello   world", "Hello world"),
        ("<script>alert(1)</script>", ""),
        ("Hi<script type='x'>alert(1)</script> there", "Hi there"),
        ("<style>p { color: red }</style>Text", "Text"),
        ("<p>One</p><p>Two <b>bold</b></p>", "One\n\nTwo bold"),
        ("<div>One</div>Two", "One\nTwo"),
        ("Line<br/>break", "Line\nbreak"),
        ("Keep <!-- a comment --> this.", "Keep this."),
        ("x <script>never closed", "x"),
        ("Fish &amp; chips &lt;b&gt;", "Fish & chips"),
        ("“Curly” ‘quotes’", "\"Curly\" 'quotes'"),
        ("Wait -- what?", "Wait — what?"),
        ("10–20", "10-20"),
        ("Hmm… ok. . . fine.....", "Hmm... ok... fine..."),
        ("tab\tseparated", "tab separated"),
        ("bell\x07null\x00esc\x1b", "bell null esc"),
        ("zero\u200bwidth", "zero width"),
        ("soft\u00adhyphen", "softhyphen"),
        ("I 😀 love 🎉 it 👍🏽!", "I love it!"),
        ("keycap 1️⃣", "keycap 1"),
        ("a → b ★ c", "a b c"),
        ("**bold** and \\slash", "bold and slash"),
        ("Price: $5 + 10% @ home #1 / 20°", "Price: $5 + 10% @ home #1 / 20°"),
        ("ＦＵＬＬ width １２３", "FULL width 123"),
        ("para one\n\n\n\npara two", "para one\n\npara two"),
        ("  \n line \n  ", "line"),
        ("lone \ud800 surrogate", "lone surrogate"),
        ("", ""),
        ("   \t\n  ", ""),
    ],
)
def test_clean_text(raw: str, cleaned: str) -> None:
    assert clean_text(raw) == cleaned


def test_clean_text_keeps_every_script() -> None:
    text = "English, русский, ελληνικά, עברית, العربية, हिन्दी, 日本語、한국어。"
    assert clean_text(text) == text


def test_clean_text_keeps_joiners_inside_words_only() -> None:
    assert clean_text("می\u200cخواهم") == "می\u200cخواهم"
    assert clean_text("😀\u200d😀 hi") == "hi"


def test_clean_text_never_raises_on_non_strings() -> None:
    assert clean_text(None) == ""  # type: ignore[arg-type]
    assert clean_text(42) == "42"  # type: ignore[arg-type]


# -----------------------------------------------------------------------------
# split_sentences
# -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Dr. Smith went to Washington. He left.", ["Dr. Smith went to Washington.", "He left."]),
        ("Mr. and Mrs. Smith arrived.", ["Mr. and Mrs. Smith arrived."]),
        ("Fruit, e.g. apples, is good. Yes.", ["Fruit, e.g. apples, is good.", "Yes."]),
        ("Use i.e., that is. Done.", ["Use i.e., that is.", "Done."]),
        ("The U.S. Army is big. I live in the U.S. The end.",
         ["The U.S. Army is big.", "I live in the U.S.", "The end."]),
        ("It is 3.5 meters. Ok.", ["It is 3.5 meters.", "Ok."]),
        ("J. R. R. Tolkien wrote it. Then he slept.",
         ["J. R. R. Tolkien wrote it.", "Then he slept."]),
        ("Apples, pears, etc. The rest.", ["Apples, pears, etc.", "The rest."]),
        ("See No. 5 for details. The answer is no. Fine.",
         ["See No. 5 for details.", "The answer is no.", "Fine."]),
        ("Meet at St. Louis. Then go.", ["Meet at St. Louis.", "Then go."]),
        ('He said "Stop!" Then he left.', ['He said "Stop!"', "Then he left."]),
        ('"Really?" she asked.', ['"Really?" she asked.']),
        ("(This is a test.) Another one.", ["(This is a test.)", "Another one."]),
        ("Wow!!! Really?! Yes?!", ["Wow!!!", "Really?!", "Yes?!"]),
        ("Hmm... I think so… Yes.", ["Hmm...", "I think so…", "Yes."]),
        ("I think... maybe not.", ["I think... maybe not."]),
        ("你好。我很好！你呢？Good.", ["你好。", "我很好！", "你呢？", "Good."]),
        ("你好!我很好", ["你好!", "我很好"]),
        ("Line one\nLine two\n\nParagraph two.", ["Line one", "Line two", "Paragraph two."]),
        ("In 1999. Then 2000.", ["In 1999.", "Then 2000."]),
        ("Version 2.0.1 is out. Get it.", ["Version 2.0.1 is out.", "Get it."]),
        ("Hello. ...", ["Hello. ..."]),
        ("", []),
        ("   \n\n  ", []),
        ("?!.", []),
        ("...", []),
        ('"unmatched quote. Next', ['"unmatched quote.', "Next"]),
    ],
)  # fmt: skip
def test_split_sentences(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


def test_split_sentences_keeps_all_words_in_order() -> None:
    text = "A first one. Dr. No said hi! Then e.g. this? Done... Ok。Fin"
    assert " ".join(split_sentences(text)).split() == text.replace("。", "。 ").split()


def test_split_paragraphs() -> None:
    assert split_paragraphs("One.\nStill one.\n\n\nTwo.\n \nThree.") == [
        "One.\nStill one.",
        "Two.",
        "Three.",
    ]


def test_script_tag_input_is_harmless_end_to_end() -> None:
    assert split_sentences(clean_text("<script>alert(1)</script>")) == []
    assert split_sentences(clean_text("Hi.<script>alert(1)</script> Bye.")) == ["Hi.", "Bye."]


def _mixed_text(length: int) -> str:
    rng = random.Random(11)
    parts = [
        "Hello world.", "😀", "日本語。", "שלום!", "<b>x</b>", "Dr. Who?", "3.5", "e.g.",
        "\x00", "\n", "...", "<script>", "</script>", "&amp;", "U.S.", "\u202e", "«q»", "—",
    ]  # fmt: skip
    return " ".join(rng.choice(parts) for _ in range(length // 4))[:length]


@pytest.mark.parametrize(
    "text",
    [
        _mixed_text(100_000),
        "<" * 100_000,
        "<a" * 50_000,
        "<script" * 15_000,
        "<!--" * 25_000,
        ". " * 50_000,
        "a" * 100_000 + ".",
        "&amp;" * 20_000,
        "a. " * 33_000,
        "\x00" * 100_000,
    ],
    ids=lambda t: repr(t[:6]),
)
def test_clean_and_split_100k_characters_under_a_second(text: str) -> None:
    # CPU time, not wall time: the budget is about our algorithm, not the machine's load.
    started = time.process_time()
    sentences = split_sentences(clean_text(text))
    assert time.process_time() - started < 1.0
    assert all(s == s.strip() and s for s in sentences)


# -----------------------------------------------------------------------------
# split_for_budget
# -----------------------------------------------------------------------------


class CountingMeasure:
    """Letters-and-punctuation count as a stand-in for phoneme tokens; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return len(text.replace(" ", ""))


LONG_SENTENCE = (
    "This is a rather long sentence, with several clauses; some of them are long: and others "
    "— not so much, but we need to split it and then check that every piece fits the budget "
    "because that is the contract."
)


def test_short_sentence_is_measured_once_and_kept_whole() -> None:
    measure = CountingMeasure()
    assert split_for_budget("  Short one.  ", measure, 100) == ["Short one."]
    assert measure.calls == 1


@pytest.mark.parametrize("budget", [150, 60, 40, 25, 12])
def test_every_piece_fits_and_words_are_preserved(budget: int) -> None:
    measure = CountingMeasure()
    pieces = split_for_budget(LONG_SENTENCE, measure, budget)
    assert all(measure(p) <= budget for p in pieces)
    assert " ".join(pieces).split() == LONG_SENTENCE.split()
    assert all(p == p.strip() and p for p in pieces)


def test_measure_is_called_about_once_per_piece() -> None:
    measure = CountingMeasure()
    pieces = split_for_budget(LONG_SENTENCE, measure, 40)
    assert len(pieces) >= 4
    assert measure.calls <= 2 * len(pieces) + 2


def test_strong_clause_boundaries_are_preferred_over_commas() -> None:
    sentence = "Alpha beta, gamma delta; epsilon zeta, eta theta."
    pieces = split_for_budget(sentence, CountingMeasure(), 30)
    assert pieces == ["Alpha beta, gamma delta;", "epsilon zeta, eta theta."]


def test_commas_are_used_before_plain_word_boundaries() -> None:
    sentence = "We bought apples and pears, then we walked home slowly"
    pieces = split_for_budget(sentence, CountingMeasure(), 30)
    assert pieces == ["We bought apples and pears,", "then we walked home slowly"]


def test_conjunction_starts_the_next_piece() -> None:
    sentence = "The quick brown fox jumped high and the lazy dog slept on"
    pieces = split_for_budget(sentence, CountingMeasure(), 30)
    assert pieces == ["The quick brown fox jumped high", "and the lazy dog slept on"]


def test_single_overlong_word_is_hard_split() -> None:
    measure = CountingMeasure()
    word = "Supercalifragilisticexpialidocious"
    pieces = split_for_budget(word, measure, 10)
    assert "".join(pieces) == word
    assert all(measure(p) <= 10 for p in pieces)
    assert len(pieces) >= 4


def test_hard_split_never_separates_a_combining_mark() -> None:
    word = "e\u0301" * 20  # é as e + combining acute
    pieces = split_for_budget(word, len, 5)
    assert "".join(pieces) == word
    assert all(not p.startswith("\u0301") for p in pieces)
    assert all(len(p) <= 5 for p in pieces)


def test_uneven_measure_still_fits() -> None:
    # Digits cost ten tokens each: length-based estimates are badly off.
    def measure(text: str) -> int:
        return sum(10 if ch.isdigit() else 1 for ch in text if not ch.isspace())

    sentence = "call 1234 now, then 5678 later, and 9999 after that, ok"
    pieces = split_for_budget(sentence, measure, 45)
    assert all(measure(p) <= 45 for p in pieces)
    assert " ".join(pieces).split() == sentence.split()


def test_empty_sentence_gives_no_pieces() -> None:
    assert split_for_budget("   ", CountingMeasure(), 10) == []


def test_invalid_budget_raises_typed_error() -> None:
    with pytest.raises(InvalidInput) as raised:
        split_for_budget("hello", CountingMeasure(), 0)
    assert raised.value.field == "budget"


def test_character_costlier_than_budget_raises_typed_error() -> None:
    with pytest.raises(InvalidInput):
        split_for_budget("ab", lambda text: 5 * len(text), 3)


# -----------------------------------------------------------------------------
# first_chunk_for_streaming
# -----------------------------------------------------------------------------


def test_short_first_sentence_is_unchanged() -> None:
    sentences = ["Hello there.", "Second."]
    assert first_chunk_for_streaming(sentences) == sentences
    assert first_chunk_for_streaming([]) == []


def test_long_first_sentence_splits_at_first_clause_boundary() -> None:
    sentences = [
        "When the sun rose over the hills, everyone in the small village woke up at once.",
        "Second.",
    ]
    assert first_chunk_for_streaming(sentences) == [
        "When the sun rose over the hills,",
        "everyone in the small village woke up at once.",
        "Second.",
    ]


def test_too_early_boundary_is_skipped() -> None:
    first = "Well, this is a very long first sentence that goes on, and on for a while."
    assert first_chunk_for_streaming([first]) == [
        "Well, this is a very long first sentence that goes on,",
        "and on for a while.",
    ]


def test_no_clause_boundary_splits_after_max_words() -> None:
    first = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen."
    result = first_chunk_for_streaming([first], max_words=5)
    assert result == [
        "one two three four five",
        "six seven eight nine ten eleven twelve thirteen fourteen.",
    ]


def test_a_cut_that_would_leave_a_lone_word_is_not_made() -> None:
    # A one-word chunk of its own is the least intelligible piece Kokoro speaks.
    five = "The old bridge was busier."
    assert first_chunk_for_streaming([five], max_words=3, min_tail_words=3) == [five]
    six = "The old bridge was busier today."
    assert first_chunk_for_streaming([six], max_words=3, min_tail_words=3) == [
        "The old bridge",
        "was busier today.",
    ]
    clause = "Hi there, all of you."
    assert first_chunk_for_streaming([clause], max_words=3, min_tail_words=3) == [clause]
    # The default keeps the old behaviour for other callers.
    assert first_chunk_for_streaming([five], max_words=4) == ["The old bridge was", "busier."]


def test_the_streamed_first_chunk_is_three_words_with_three_left_behind() -> None:
    from voxclone.synth.text import frontend

    assert (frontend.STREAM_FIRST_CHUNK_WORDS, frontend.STREAM_MIN_TAIL_WORDS) == (3, 2)


def test_input_list_is_not_modified() -> None:
    sentences = ["a b c d e, f g h i j k l m n o p q.", "x"]
    copy = list(sentences)
    first_chunk_for_streaming(sentences, max_words=6)
    assert sentences == copy


def test_invalid_max_words_raises_typed_error() -> None:
    with pytest.raises(InvalidInput):
        first_chunk_for_streaming(["a b"], max_words=0)


# -----------------------------------------------------------------------------
# sentence_pause_s
# -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("piece", "pause"),
    [
        ("Why?", 0.4),
        ("Wow!", 0.4),
        ('He said "Stop!"', 0.4),
        ("Hmm...", 0.4),
        ("Done.", 0.3),
        ("(Done.)", 0.3),
        ("終わり。", 0.3),
        ("first;", 0.18),
        ("note:", 0.18),
        ("and then —", 0.15),
        ("first,", 0.12),
        ("一、", 0.12),
        ("supercali", 0.05),
        ("", 0.05),
    ],
)
def test_sentence_pause_by_final_mark(piece: str, pause: float) -> None:
    assert sentence_pause_s(piece) == pytest.approx(pause)


def test_paragraph_end_is_the_longest_pause() -> None:
    assert sentence_pause_s("Done.", paragraph_end=True) == pytest.approx(0.5)
    assert sentence_pause_s("Done.\n") == pytest.approx(0.5)
    assert sentence_pause_s("Done.", paragraph_end=True) > sentence_pause_s("Why?")
