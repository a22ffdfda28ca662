"""Hostile text never crashes or hangs: it gives speech or a typed error."""

from __future__ import annotations

import time

import pytest

from voxclone.errors import InvalidInput, PayloadTooLarge, VoxcloneError
from voxclone.service.speech.service import SpeechRequest

pytestmark = pytest.mark.models

SPEAKABLE = {
    "emoji": "I love pizza 🍕🍕 and 🎉 parties!",
    "rtl_cjk_mix": "Hello שלום مرحبا 你好 world, this is mixed.",
    "control_chars": "Line one\x00\x07\x1b[31m red\x7f text\r\nline two\u200b.",
    "unmatched_quotes": 'He said "hello and (then left.',
    "script_tag": "<script>alert('x')</script>Welcome to the show.",
    "numbers": "On 2024-03-15 at 3:45 pm, 50% of $1,234.56 was 1st.",
}

UNSPEAKABLE = {
    "empty": "",
    "whitespace": "   \n\t  ",
    "only_punctuation": "?!... ,,, ;;; --",
}


@pytest.mark.parametrize("name", sorted(SPEAKABLE))
def test_odd_but_speakable_text_gives_audio(runtime: object, name: str) -> None:
    audio = runtime.speech.render_audio(SpeechRequest(text=SPEAKABLE[name]))  # type: ignore[attr-defined]
    assert audio.size > 24_000 * 0.5, name


@pytest.mark.parametrize("name", sorted(UNSPEAKABLE))
def test_unspeakable_text_is_a_typed_error(runtime: object, name: str) -> None:
    with pytest.raises(InvalidInput) as info:
        runtime.speech.render_audio(SpeechRequest(text=UNSPEAKABLE[name]))  # type: ignore[attr-defined]
    assert info.value.field == "text"


def test_text_over_the_limit_is_refused_before_any_work(runtime: object) -> None:
    started = time.perf_counter()
    with pytest.raises(PayloadTooLarge) as info:
        runtime.speech.render_audio(SpeechRequest(text="a" * 100_001))  # type: ignore[attr-defined]
    assert info.value.limit == 100_000
    assert time.perf_counter() - started < 1.0


def test_hundred_thousand_characters_plan_quickly_and_lazily(runtime: object) -> None:
    # 100k characters is hours of audio; prove the planner handles it (no
    # hang, bounded first-chunk latency) and that synthesis starts at once.
    text = ("The rain in Spain stays mainly in the plain. " * 2300)[:100_000]
    started = time.perf_counter()
    # The router picks the engine's service; the test drives its planner directly.
    speech, request = runtime.speech.route(SpeechRequest(text=text))  # type: ignore[attr-defined]
    pieces = speech.render_pieces(request, fast_start=True)
    first = next(pieces)
    pieces.close()
    assert first.size > 0
    assert time.perf_counter() - started < 20


def test_unknown_voice_is_not_found(runtime: object) -> None:
    with pytest.raises(VoxcloneError) as info:
        runtime.speech.render_audio(SpeechRequest(text="hi there", voice="nobody"))  # type: ignore[attr-defined]
    assert info.value.status == 404 and info.value.field == "voice"


def test_long_text_is_chunked_and_joined(runtime: object) -> None:
    # Several sentences and one run-on sentence longer than the model's phoneme
    # budget (~530 phonemes, so it must be split inside the sentence). Fewer
    # short sentences than the ~1,500 characters this once had: they exercised
    # nothing more and cost ~30 s of CI.
    long_sentence = ", ".join(["and then we walked a little further down the road"] * 14) + "."
    text = "This is the start. " * 4 + long_sentence + " The end."
    audio = runtime.speech.render_audio(SpeechRequest(text=text))  # type: ignore[attr-defined]
    seconds = audio.size / 24_000
    # ~150 words: a dropped chunk (~10 words) or a doubled one moves it out of range.
    assert 30 < seconds < 120
