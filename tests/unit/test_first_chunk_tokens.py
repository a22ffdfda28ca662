"""A stream's first chunk is sized by the engine's tokens, not only by words.

Three words is the rule (studies/first_chunk.py), but the engine's time grows
with tokens: three long words cost as much as six short ones. Real G2P and
vocabulary, no model.
"""

from __future__ import annotations

import pytest

from voxclone.synth.engine.kokoro.assets import load_vocab
from voxclone.synth.text import frontend as frontend_module
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.g2p_router import MultiG2P


@pytest.fixture(scope="module")
def frontend() -> TextFrontend:
    return TextFrontend(MultiG2P(dict(load_vocab())), max_tokens=510)


def first_chunk(frontend: TextFrontend, text: str) -> tuple[str, int]:
    chunk = next(iter(frontend.plan(text, "en-us", fast_start=True)))
    return chunk.text, len(chunk.token_ids)


def test_ordinary_words_keep_the_three_word_first_chunk(frontend: TextFrontend) -> None:
    text, tokens = first_chunk(frontend, "The cat sat on the mat by the door. It slept.")
    assert text == "The cat sat"
    assert tokens <= frontend_module.STREAM_FIRST_CHUNK_TOKENS


def test_long_opening_words_give_a_shorter_first_chunk(frontend: TextFrontend) -> None:
    sentence = (
        "Internationally recognized researchers unexpectedly demonstrated "
        "extraordinary characteristics yesterday afternoon."
    )
    three_words = " ".join(sentence.split()[:3])
    whole, _ = first_chunk(frontend, three_words + ".")
    assert whole == three_words + "."
    text, tokens = first_chunk(frontend, sentence)
    # Fewer words (never fewer than the minimum), so fewer tokens before the first audio.
    assert text == "Internationally recognized"
    assert tokens < len(next(iter(frontend.plan(three_words, "en-us"))).token_ids)


def test_the_rest_of_the_sentence_still_follows_in_order(frontend: TextFrontend) -> None:
    sentence = "Internationally recognized researchers demonstrated it again today."
    chunks = list(frontend.plan(sentence, "en-us", fast_start=True))
    assert " ".join(c.text for c in chunks) == sentence
    assert len(chunks) == 2
