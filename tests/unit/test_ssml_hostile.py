"""The hostile SSML and number texts of issue 37's probe, kept as a corpus:
each is refused with a typed 4xx error naming the field and the limit, or
spoken in a bounded way, and none raises anything else.

The HTTP side of the same corpus is tests/api/test_ssml_hostile_http.py.
"""

from __future__ import annotations

import logging
import tracemalloc

import pytest

from voxclone.config import Settings
from voxclone.errors import InvalidSsml, PayloadTooLarge, VoxcloneError
from voxclone.synth.engine.kokoro.assets import load_vocab
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.g2p_router import MultiG2P
from voxclone.synth.text.inline_phonemes import UnspeakablePhonemes
from voxclone.synth.text.normalize_en import normalize_english
from voxclone.synth.text.normalize_intl import international_normalizers
from voxclone.synth.text.ssml import (
    MAX_DEPTH,
    MAX_ELEMENTS,
    SsmlBreak,
    SsmlText,
    check_output_s,
    parse_ssml,
    silence_budget_s,
    ssml_silence_s,
)
from voxclone.synth.text.wordtimes import OriginalWordMapper, WordTime

BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
    + "]><speak>&lol9;</speak>"
).replace("&lol0;", "&lol;")
XXE = '<!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>'


def _nested(levels: int) -> str:
    return "<speak>" + "<emphasis>" * levels + "x" + "</emphasis>" * levels + "</speak>"


def _breaks(count: int, seconds: float = 10.0) -> str:
    return "<speak>" + f'<break time="{seconds:g}s"/>word.' * count + "</speak>"


# (name, document, error class, what ``limit`` holds)
REFUSED = [
    ("billion-laughs", BILLION_LAUGHS, InvalidSsml, None),
    ("xxe", XXE, InvalidSsml, None),
    (
        "4M-empty-elements",
        "<speak>" + "<a/>" * 4_000_000 + "</speak>",
        PayloadTooLarge,
        MAX_ELEMENTS,
    ),
    ("deep-nesting", _nested(3000), InvalidSsml, MAX_DEPTH),
    # 1,000 × "word." is 5,000 characters of text: about 333 s to say.
    ("breaks-x1000", _breaks(1000), PayloadTooLarge, round(silence_budget_s(5000), 1)),
    ("breaks-x5000", _breaks(5000), PayloadTooLarge, None),
    ("volume-7000dB", '<speak><prosody volume="+7000dB">hi</prosody></speak>', InvalidSsml, None),
    ("volume-percent", '<speak><prosody volume="-150%">hi</prosody></speak>', InvalidSsml, None),
    ("rate-zero", '<speak><prosody rate="0%">hi</prosody></speak>', InvalidSsml, None),
    ("rate-huge", f'<speak><prosody rate="{"9" * 400}%">hi</prosody></speak>', InvalidSsml, None),
    ("pitch-st", '<speak><prosody pitch="+900st">hi</prosody></speak>', InvalidSsml, None),
    ("pitch-percent", '<speak><prosody pitch="-100%">hi</prosody></speak>', InvalidSsml, None),
]


@pytest.mark.parametrize(
    ("document", "error", "limit"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_hostile_documents_are_refused_with_a_typed_error(
    document: str, error: type[VoxcloneError], limit: object
) -> None:
    with pytest.raises(error) as caught:
        parse_ssml(document)
    assert 400 <= caught.value.status < 500 and caught.value.field == "text"
    if limit is not None:
        assert caught.value.limit == limit


def test_millions_of_elements_are_refused_before_a_tree_is_built() -> None:
    document = "<speak>" + "<a/>" * 4_000_000 + "</speak>"
    tracemalloc.start()
    try:
        with pytest.raises(PayloadTooLarge) as caught:
            parse_ssml(document)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f"{MAX_ELEMENTS} elements" in caught.value.message
    # 4 M Elements are hundreds of MB; the count stops at the first 10,001.
    assert peak < 8 << 20


def test_the_limits_leave_real_documents_alone() -> None:
    # As deep as allowed: <speak> and 31 elements inside it.
    (deepest,) = parse_ssml(_nested(MAX_DEPTH - 1)).items
    assert isinstance(deepest, SsmlText) and deepest.text == "x"
    with pytest.raises(InvalidSsml):
        parse_ssml(_nested(MAX_DEPTH))
    # A long document marked up sentence by sentence.
    sentence = "<s>The <emphasis>quick</emphasis> fox jumped.<break time='300ms'/></s>"
    doc = parse_ssml("<speak><p>" + sentence * 3000 + "</p></speak>")
    assert len([i for i in doc.items if isinstance(i, SsmlBreak)]) == 3000
    # Short pauses of a guided meditation: five minutes of silence at least.
    calm = parse_ssml("<speak>" + "Breathe in.<break time='10s'/>" * 30 + "</speak>")
    assert ssml_silence_s(calm) == pytest.approx(300.0)


def test_the_silence_budget_grows_with_the_text_and_names_its_limit() -> None:
    with pytest.raises(PayloadTooLarge) as caught:
        parse_ssml(_breaks(1000))
    error = caught.value
    assert error.value == pytest.approx(10_000.0)
    assert error.limit is not None and error.limit < 10_000.0
    assert "silence" in error.message and f"{error.limit:.0f} s" in error.message
    # The same breaks separating speech as long as them are fine.
    words = "the rain in Spain stays mainly in the plain " * 4  # ~180 characters, ~12 s
    doc = parse_ssml("<speak>" + f"{words}<break time='10s'/>" * 300 + "</speak>")
    assert ssml_silence_s(doc) == pytest.approx(3000.0)


def test_the_total_output_cap_counts_speech_at_the_requests_speed_and_silence() -> None:
    doc = parse_ssml("<speak>" + "Hello there.<break time='10s'/>" * 30 + "</speak>")
    check_output_s(doc, limit_s=400.0, speed=1.0)  # ~24 s of speech + 300 s of silence
    with pytest.raises(PayloadTooLarge) as caught:
        check_output_s(doc, limit_s=310.0, speed=0.5)
    assert caught.value.limit == 310.0 and caught.value.field == "text"
    assert "max_output_s" in caught.value.message
    # The default fits the longest plain text at the slowest speed.
    settings = Settings()
    longest = parse_ssml("<speak>" + "a" * settings.max_text_chars + "</speak>")
    check_output_s(longest, limit_s=settings.max_output_s, speed=0.5)


def test_prosody_in_range_still_maps_and_names_the_attribute_when_not() -> None:
    doc = parse_ssml(
        '<speak><prosody rate="10%" pitch="-24st" volume="-40dB">a</prosody>'
        '<prosody rate="1000%" pitch="+300%" volume="1000%">b</prosody></speak>'
    )
    a, b = doc.items
    assert isinstance(a, SsmlText) and isinstance(b, SsmlText)
    assert a.prosody.rate == pytest.approx(0.1) and a.prosody.pitch == pytest.approx(-2.0)
    assert b.prosody.rate == pytest.approx(10.0) and b.prosody.volume == pytest.approx(10.0)
    with pytest.raises(InvalidSsml) as caught:
        parse_ssml('<speak><prosody volume="+7000dB">hi</prosody></speak>')
    assert "volume" in caught.value.message and "+40dB" in caught.value.message
    assert caught.value.limit == {"attribute": "volume", "min": "-40dB", "max": "+40dB"}


@pytest.mark.parametrize(
    "body",
    [
        "<say-as interpret-as='date'>{d}</say-as>",
        "<say-as interpret-as='date' format='md'>1/{d}</say-as>",
        "<say-as interpret-as='date' format='y'>{d}</say-as>",
        "<say-as interpret-as='date' format='ymd'>{d}-01-01</say-as>",
        "<say-as interpret-as='cardinal'>{d}</say-as>",
        "<say-as interpret-as='ordinal'>{d}</say-as>",
        "<say-as interpret-as='date'>²⁰²⁴-01-01</say-as>",
    ],
)
def test_say_as_with_thousands_of_digits_is_read_as_written(body: str) -> None:
    digits = "1" * 5000
    (item,) = parse_ssml("<speak>" + body.format(d=digits) + "</speak>").items
    assert isinstance(item, SsmlText) and item.text


NUMBERS = {
    "dollar-400": "$" + "9" * 400,
    "dollar-5000-cents": "$" + "1" * 5000 + ".99",
    "digits-5000": "It was " + "1" * 5000 + " today.",
    "percent-5000": "1" * 5000 + "%",
    "decimal-5000": "3." + "1" * 5000,
    "money-after-5000": "1" * 5000 + " €",
    "grouped-5000": ",".join(["999"] * 1700),
}


@pytest.mark.parametrize("text", list(NUMBERS.values()), ids=list(NUMBERS))
def test_normalizers_read_long_digit_strings_without_raising(
    text: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        assert normalize_english(text) != text
        for normalize in international_normalizers().values():
            assert normalize(text)
    # The normalizers catch a failing rule, log it and leave that text as
    # written: none may fail.
    assert [r.getMessage() for r in caplog.records] == []


# ------------------------------------------------------------------ phonemes


@pytest.fixture(scope="module")
def frontend() -> TextFrontend:
    return TextFrontend(MultiG2P(dict(load_vocab())), max_tokens=510)


@pytest.mark.parametrize(
    ("text", "unknown"),
    [
        ("I say [x](/ǃǂǁ/).", ["ǃ", "ǂ", "ǁ"]),
        ("[tomato](/123/)", ["1", "2", "3"]),
        ("<phoneme>", ["ʘ"]),
    ],
)
def test_ipa_that_says_nothing_is_refused_naming_its_symbols(
    frontend: TextFrontend, text: str, unknown: list[str]
) -> None:
    if text == "<phoneme>":  # the SSML form becomes the inline one
        (item,) = parse_ssml("<speak><phoneme ph='ʘʘ'>kiss</phoneme> me</speak>").items
        assert isinstance(item, SsmlText)
        text = item.text
    with pytest.raises(UnspeakablePhonemes) as caught:
        list(frontend.plan(text, "en-us"))
    error = caught.value
    assert error.status == 400 and error.field == "text"
    assert error.limit == {"unknown": unknown}
    assert all(symbol in error.message for symbol in unknown)
    # Refused while the text is prepared, so before any chunk exists.
    with pytest.raises(UnspeakablePhonemes):
        frontend.prepare(text, "en-us")


def test_ipa_with_some_sound_is_still_spoken(frontend: TextFrontend) -> None:
    chunk = next(frontend.plan("I say [tomato](/təˈmɑːtoʊǃ/).", "en-us"))
    assert "təˈmɑtO" in chunk.phonemes
    with pytest.raises(UnspeakablePhonemes) as caught:
        list(frontend.plan("[x](/ˈˌ/)", "en-us"))  # stress marks alone say nothing
    assert "stress" in caught.value.message


def test_captions_show_an_inline_phoneme_as_its_word() -> None:
    mapper = OriginalWordMapper("I like [tomato](/təˈmɑːtoʊ/) soup.")
    spoken = [WordTime(w, float(n), n + 0.5) for n, w in enumerate(["I", "like", "tomato", "soup"])]
    words = [w.word for w in mapper.feed(spoken) + mapper.finish()]
    assert words == ["I", "like", "tomato", "soup"]
    spaced = OriginalWordMapper("See [New York](/nuː jɔːk/) now")
    times = [WordTime(w, 0.0, 1.0) for w in ["See", "New", "York", "now"]]
    assert [w.word for w in spaced.feed(times) + spaced.finish()] == ["See", "New", "York", "now"]
