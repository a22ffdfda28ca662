"""The SSML subset and inline phonemes, down to the phonemes the engine is given.

The parser is pure (synth/text/ssml.py); the phoneme checks run the real
frontend over the real espeak/Kokoro vocabulary, so "the spoken phonemes
change" is what is compared, not the markup.
"""

from __future__ import annotations

import tracemalloc

import pytest

from voxclone.errors import InvalidSsml, UnsupportedLanguage
from voxclone.synth.engine.kokoro.assets import load_vocab
from voxclone.synth.text.frontend import TextFrontend
from voxclone.synth.text.g2p_router import MultiG2P
from voxclone.synth.text.ssml import (
    Prosody,
    SsmlBreak,
    SsmlText,
    as_document,
    looks_like_ssml,
    parse_ssml,
    ssml_language,
)


@pytest.fixture(scope="module")
def frontend() -> TextFrontend:
    return TextFrontend(MultiG2P(dict(load_vocab())), max_tokens=510)


def phonemes(frontend: TextFrontend, text: str, language: str = "en-us") -> str:
    return " ".join(c.phonemes for c in frontend.plan(text, language))


def texts(doc_text: str) -> list[str]:
    return [i.text for i in parse_ssml(doc_text).items if isinstance(i, SsmlText)]


# ------------------------------------------------------------------ detection


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<speak>hi</speak>", True),
        ('  <speak version="1.1" xmlns="http://www.w3.org/2001/10/synthesis">hi</speak>', True),
        ('<?xml version="1.0"?>\n<speak>hi</speak>', True),
        ("<!DOCTYPE speak><speak>hi</speak>", True),
        ("<!DOCTYPE html><html><body>Welcome</body></html>", False),
        ("<speaker>hi</speaker>", False),
        ("Say <speak> aloud", False),
        ("plain text", False),
    ],
)
def test_ssml_is_detected_by_its_root(text: str, expected: bool) -> None:
    assert looks_like_ssml(text) is expected


def test_a_fragment_is_wrapped_when_the_flag_says_ssml() -> None:
    assert (
        as_document('Hi <break time="1s"/> there') == '<speak>Hi <break time="1s"/> there</speak>'
    )
    assert as_document("<speak>x</speak>") == "<speak>x</speak>"


# ------------------------------------------------------------------ the subset


def test_break_time_and_strength_become_silences_between_texts() -> None:
    doc = parse_ssml(
        '<speak>One<break time="800ms"/>two<break time="1.5s"/>three'
        '<break strength="x-strong"/>four<break/>five<break strength="none"/>six</speak>'
    )
    assert doc.items == (
        SsmlText("One"),
        SsmlBreak(0.8),
        SsmlText("two"),
        SsmlBreak(1.5),
        SsmlText("three"),
        SsmlBreak(1.0),
        SsmlText("four"),
        SsmlBreak(0.4),  # no attribute: medium
        SsmlText("five six"),  # strength none: no silence, one text
    )


def test_prosody_maps_onto_speed_pitch_and_energy_and_nests() -> None:
    doc = parse_ssml(
        '<speak><prosody rate="slow" pitch="+12st" volume="+6dB">a'
        '<prosody rate="50%" pitch="-50%" volume="soft">b</prosody></prosody>'
        '<prosody rate="+20%" pitch="x-high">c</prosody></speak>'
    )
    a, b, c = doc.items
    assert isinstance(a, SsmlText) and isinstance(b, SsmlText) and isinstance(c, SsmlText)
    assert a.prosody == Prosody(rate=0.8, pitch=1.0, volume=a.prosody.volume)
    assert a.prosody.volume == pytest.approx(1.995, abs=1e-3)
    assert b.prosody.rate == pytest.approx(0.4)  # nested: 0.8 × 50 %
    assert b.prosody.pitch == pytest.approx(0.0)  # +1 octave, then −1 octave
    assert b.prosody.volume == pytest.approx(1.995 * 0.9, abs=1e-3)
    assert c.prosody == Prosody(rate=1.2, pitch=0.3, volume=1.0)


def test_emphasis_is_slower_higher_and_louder() -> None:
    (_, stressed) = parse_ssml("<speak>I said <emphasis level='strong'>no</emphasis></speak>").items
    assert isinstance(stressed, SsmlText)
    assert stressed.prosody.rate < 1 and stressed.prosody.pitch > 0 and stressed.prosody.volume > 1


def test_voice_and_lang_switch_mid_text() -> None:
    doc = parse_ssml(
        '<speak xml:lang="en-US">Hello <voice name="clear_male">there</voice> '
        '<lang xml:lang="fr-FR">bonjour</lang></speak>'
    )
    assert doc.language == "en-US"
    assert [(i.text, i.voice, i.language) for i in doc.items if isinstance(i, SsmlText)] == [
        ("Hello", None, "en-US"),
        ("there", "clear_male", "en-US"),
        ("bonjour", None, "fr-FR"),
    ]
    assert doc.voices == {"clear_male"}


def test_say_as_sub_and_phoneme_become_the_words_to_say() -> None:
    assert texts(
        "<speak><say-as interpret-as='characters'>WHO</say-as> "
        "<say-as interpret-as='cardinal'>1,234</say-as> "
        "<say-as interpret-as='ordinal'>3</say-as> "
        "<say-as interpret-as='date' format='mdy'>12/25/2024</say-as> "
        "<say-as interpret-as='telephone'>+1 555-0134</say-as> "
        "<sub alias='World Health Organization'>WHO</sub> "
        "<phoneme alphabet='ipa' ph='təˈmɑːtoʊ'>tomato</phoneme></speak>"
    ) == [
        "double-you aitch oh one thousand two hundred thirty-four third "
        "December twenty-fifth, twenty twenty-four plus, 1, 5 5 5, 0 1 3 4 "
        "World Health Organization [tomato](/təˈmɑːtoʊ/)"
    ]


def test_unknown_tags_are_dropped_with_a_warning_and_never_read() -> None:
    doc = parse_ssml(
        "<speak><foo bar='1'>hello</foo> <audio src='x.wav'>fallback</audio>"
        "<mark name='m'/><say-as interpret-as='weird'>w</say-as></speak>"
    )
    assert texts("<speak><foo>hello</foo></speak>") == ["hello"]
    spoken = " ".join(i.text for i in doc.items if isinstance(i, SsmlText))
    assert "foo" not in spoken and "audio" not in spoken and "<" not in spoken
    assert any("<foo>" in w for w in doc.warnings)
    assert any("<audio>" in w for w in doc.warnings)
    assert any("weird" in w for w in doc.warnings)


def test_namespaced_documents_parse() -> None:
    doc = parse_ssml(
        '<speak version="1.1" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="en-GB">'
        '<p><s>First.</s><s>Second<break time="200ms"/>third.</s></p></speak>'
    )
    assert doc.language == "en-GB"
    assert doc.items[0] == SsmlText("First.\nSecond", language="en-GB")
    assert doc.items[1] == SsmlBreak(0.2)


def test_xml_lang_codes_map_onto_ours() -> None:
    ours = ("en-us", "en-gb", "fr", "pt-br", "ja")
    assert ssml_language("en-US", ours) == "en-us"
    assert ssml_language("en", ours) == "en-us"
    assert ssml_language("fr-CA", ours) == "fr"
    assert ssml_language("pt_BR", ours) == "pt-br"
    assert ssml_language("ja-JP", ours) == "ja"
    with pytest.raises(UnsupportedLanguage):
        ssml_language("ko-KR", ours)


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("<speak>hi<break></speak>", 1, 19),
        ("<speak>\n  <prosody rate='slow'>hi\n</speak>", 3, 3),
        ("<speak>a & b</speak>", 1, 11),
        ("<speak>hi", 1, 10),
    ],
)
def test_malformed_ssml_names_line_and_column(text: str, line: int, column: int) -> None:
    with pytest.raises(InvalidSsml) as caught:
        parse_ssml(text)
    assert caught.value.status == 400
    assert caught.value.limit == {"line": line, "column": column}
    assert f"line {line}, column {column}" in caught.value.message


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
    + "]><speak>&lol9;</speak>"
).replace("&lol0;", "&lol;")


@pytest.mark.parametrize(
    "text",
    [
        BILLION_LAUGHS,
        '<!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>',
        '<!DOCTYPE speak SYSTEM "http://127.0.0.1:9/ssml.dtd"><speak>hi</speak>',
    ],
    ids=["billion-laughs", "external-entity", "external-dtd"],
)
def test_entity_attacks_are_refused_with_flat_memory(text: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(InvalidSsml) as caught:
            parse_ssml(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.status == 400 and "DTD" in caught.value.message
    assert peak < 2 << 20  # a billion "lol"s would be gigabytes


def test_undeclared_entities_root_depth_and_long_breaks_are_refused() -> None:
    for text in (
        "<speak>&lol;</speak>",
        "<voice>no speak root</voice>",
        "<speak>" + "<emphasis>" * 80 + "x" + "</emphasis>" * 80 + "</speak>",
        '<speak>a<break time="11s"/>b</speak>',
        '<speak>a<break time="soon"/>b</speak>',
        '<speak>a<break strength="huge"/>b</speak>',
    ):
        with pytest.raises(InvalidSsml):
            parse_ssml(text)


# ------------------------------------------------------------------ what is spoken


def test_inline_phonemes_replace_the_words_g2p(frontend: TextFrontend) -> None:
    plain = phonemes(frontend, "I say tomato every day.")
    given = phonemes(frontend, "I say [tomato](/təˈmɑːtoʊ/) every day.")
    assert "təmˈATO" in plain  # espeak's American tomato
    assert "təˈmɑtO" in given and "təmˈATO" not in given  # the given IPA, folded into Kokoro's
    assert given.startswith("I sˈA") and given.endswith("ˈɛvɹi dˈA.")  # the rest unchanged
    chunk = next(frontend.plan("I say [tomato](/təˈmɑːtoʊ/).", "en-us"))
    assert chunk.text == "I say tomato."  # the words, not the markup


def test_inline_phonemes_take_kokoro_symbols_and_stand_alone(frontend: TextFrontend) -> None:
    assert phonemes(frontend, "[Kokoro](/kˈOkəɹO/)") == "kˈOkəɹO"
    assert phonemes(frontend, "[cheese](/tʃiːz/).") == "ʧiz."  # untied affricate folded
    assert phonemes(frontend, "Je dis [tomate](/tɔmat/).", "fr") == "ʒə dˈi tɔmat."


def test_ssml_sub_say_as_and_phoneme_change_the_phonemes(frontend: TextFrontend) -> None:
    def ssml_phonemes(body: str) -> str:
        (item,) = parse_ssml(f"<speak>{body}</speak>").items
        assert isinstance(item, SsmlText)
        return phonemes(frontend, item.text)

    who = ssml_phonemes("The WHO met.")
    alias = ssml_phonemes("The <sub alias='World Health Organization'>WHO</sub> met.")
    assert alias != who and "hˈɛlθ" in alias and "ˌɔɹɡənᵻzˈAʃən" in alias
    assert ssml_phonemes("<phoneme alphabet='ipa' ph='təˈmɑːtoʊ'>tomato</phoneme>") == "təˈmɑtO"
    ordinal = ssml_phonemes("<say-as interpret-as='ordinal'>2</say-as>")
    assert ordinal == phonemes(frontend, "second") != phonemes(frontend, "2")
    spelled = ssml_phonemes("<say-as interpret-as='characters'>cat</say-as>")
    assert spelled != phonemes(frontend, "cat") and spelled.count("ˈ") == 3
