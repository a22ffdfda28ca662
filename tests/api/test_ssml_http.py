"""SSML and inline phonemes over HTTP, listened to through the real Kokoro engine.

Audio checks measure the output itself: where the silence is and how long,
which voice (F0) and pace each part has. Phoneme checks read what the
engine's own frontend hands the model.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
import pyworld
import soundfile as sf
from fastapi.testclient import TestClient

from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.audio.join import audible_bounds

FRAME_S = 0.01


@pytest.fixture(scope="module")
def client(make_app_module: Any) -> Any:
    # A generous deadline: these tests are about the markup, not admission on
    # a machine that other work keeps busy.
    with TestClient(make_app_module(request_deadline_s=600.0)) as c:
        yield c


@pytest.fixture(scope="module")
def make_app_module(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from voxclone.api.app import create_app
    from voxclone.config import Settings

    def factory(**overrides: Any) -> Any:
        home = tmp_path_factory.mktemp("ssml-app")
        return create_app(
            Settings(home=home, allowed_hosts=["testserver"], **overrides), runtime=runtime
        )

    return factory


SILENT_DBFS = -50.0


def _wav(data: bytes) -> tuple[np.ndarray, int]:
    audio, rate = sf.read(io.BytesIO(data), dtype="float32")
    return np.asarray(audio), int(rate)


def _silences(audio: np.ndarray, sr: int) -> list[tuple[float, float]]:
    """(start s, length s) of every run of silent 10 ms frames inside the speech."""
    frame = int(sr * FRAME_S)
    n = len(audio) // frame
    rms = np.sqrt(np.mean(audio[: n * frame].reshape(n, frame).astype(np.float64) ** 2, axis=1))
    quiet = rms < 10 ** (SILENT_DBFS / 20)
    runs, start = [], None
    for i, q in enumerate(quiet):
        if q and start is None:
            start = i
        elif not q and start is not None:
            runs.append((start * FRAME_S, (i - start) * FRAME_S))
            start = None
    return [r for r in runs if r[0] > 0]  # leading silence is not between words


def _median_f0(audio: np.ndarray, sr: int) -> float:
    x = audio.astype(np.float64)
    f0, _ = pyworld.dio(x, sr, f0_floor=60.0, f0_ceil=500.0)
    voiced = f0[f0 > 0]
    return float(np.median(voiced))


def test_break_is_real_silence_at_its_place_and_unknown_tags_warn(client: TestClient) -> None:
    text = '<speak>Hello there my friend<break time="800ms"/><foo>how are you</foo> today?</speak>'
    r = client.post("/v1/tts", json={"text": text, "voice": "clear_female"})
    assert r.status_code == 200, r.text
    assert "<foo>" in r.headers["x-ssml-warnings"]
    audio, sr = _wav(r.content)
    bounds = audible_bounds(audio, sr)
    assert bounds is not None
    start, end = bounds[0] / sr, bounds[1] / sr
    gaps = [(at, length) for at, length in _silences(audio, sr) if at < end]
    at, longest = max(gaps, key=lambda g: g[1])
    assert longest >= 0.75  # the break, not a comma-sized pause
    # Between the two phrases: both sides hold most of a phrase of speech.
    assert at - start > 0.6 and end - (at + longest) > 0.6


def test_voice_and_prosody_switch_mid_text(client: TestClient) -> None:
    text = (
        "<speak>Good morning to you.<break time='600ms'/>"
        "<voice name='clear_male'><prosody rate='x-slow'>Good morning to you.</prosody>"
        "</voice></speak>"
    )
    r = client.post("/v1/tts", json={"text": text, "voice": "clear_female"})
    assert r.status_code == 200, r.text
    assert "x-ssml-warnings" not in r.headers
    audio, sr = _wav(r.content)
    at, length = max(_silences(audio, sr), key=lambda g: g[1])
    assert length >= 0.55
    first, second = audio[: int(at * sr)], audio[int((at + length) * sr) :]
    b1, b2 = audible_bounds(first, sr), audible_bounds(second, sr)
    assert b1 is not None and b2 is not None
    # x-slow is 0.6 × the rate: the same words take clearly longer.
    assert (b2[1] - b2[0]) > 1.4 * (b1[1] - b1[0])
    # The male voice speaks lower than the female one.
    assert _median_f0(second, sr) < 0.8 * _median_f0(first, sr)


@pytest.mark.parametrize("route", ["/v1/tts", "/v1/audio/speech"])
@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("<speak>\n  Hello <prosody rate='slow'>there\n</speak>", {"line": 3, "column": 3}),
        (
            '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
            '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]>'
            "<speak>&c;&c;&c;&c;&c;&c;</speak>",
            None,
        ),
        ('<!DOCTYPE s [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>', None),
        ('<speak>Hi<break time="30s"/></speak>', 10.0),
    ],
    ids=["malformed", "entity-bomb", "external-entity", "long-break"],
)
def test_bad_ssml_is_400_with_the_error_body(
    client: TestClient, route: str, text: str, limit: Any
) -> None:
    body = (
        {"text": text}
        if route == "/v1/tts"
        else {"model": "tts-1", "input": text, "voice": "alloy", "response_format": "wav"}
    )
    r = client.post(route, json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_ssml" and error["field"] == "text"
    assert error.get("limit") == limit
    if limit and isinstance(limit, dict):
        assert f"line {limit['line']}, column {limit['column']}" in error["message"]


def test_ssml_flag_forces_or_refuses_markup(client: TestClient) -> None:
    # A fragment with the flag is SSML (so a broken tag is an error) …
    r = client.post("/v1/tts", json={"text": "Hi <break", "ssml": True})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_ssml"
    # … and ssml=false reads even a <speak> document as plain text.
    r = client.post("/v1/tts", json={"text": "<speak>Hi <break</speak>", "ssml": False})
    assert r.status_code == 200, r.text
    # An unknown voice inside the markup is the usual 404, before any audio.
    r = client.post("/v1/tts", json={"text": "<speak><voice name='nobody'>x</voice></speak>"})
    assert r.status_code == 404 and r.json()["error"]["field"] == "voice"


def test_the_engines_frontend_speaks_the_given_pronunciations(runtime: Any) -> None:
    def phonemes(text: str) -> str:
        _, chunks = runtime.speech.plan(SpeechRequest(text=text, language="en-us"))
        return " ".join(c.phonemes for c in chunks)

    tomato = phonemes("I like [tomato](/təˈmɑːtoʊ/).")
    assert "təˈmɑtO" in tomato and tomato != phonemes("I like tomato.")
    who = phonemes("<speak>The <sub alias='World Health Organization'>WHO</sub> met.</speak>")
    assert "hˈɛlθ" in who and who != phonemes("The WHO met.")
    ipa = phonemes("<speak><phoneme alphabet='ipa' ph='təˈmɑːtoʊ'>tomato</phoneme></speak>")
    assert ipa == "təˈmɑtO"


# ------------------------------------------------------------------ lexicon


def test_lexicon_crud_is_per_owner_and_scoped(make_app_module: Any) -> None:
    app = make_app_module()
    keys = app.state.keys
    alice_rw, _ = keys.create("rw", {"tts", "voices:read", "voices:write"}, owner="alice")
    alice_ro, _ = keys.create("ro", {"tts", "voices:read"}, owner="alice")
    bob, _ = keys.create("bob", {"tts", "voices:read", "voices:write"}, owner="bob")

    def auth(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    entry = {"word": "Nguyen", "language": "en-us", "respelling": "win"}
    with TestClient(app) as c:
        r = c.post("/v1/lexicon", json=entry, headers=auth(alice_rw))
        assert r.status_code == 201, r.text
        assert r.json() == {**entry, "ipa": None}
        again = c.post("/v1/lexicon", json={**entry, "respelling": "nwin"}, headers=auth(alice_rw))
        assert again.status_code == 200 and again.json()["respelling"] == "nwin"
        # Reading needs voices:read, changing voices:write.
        assert c.post("/v1/lexicon", json=entry, headers=auth(alice_ro)).status_code == 403
        listed = c.get("/v1/lexicon", headers=auth(alice_ro)).json()["entries"]
        assert [e["word"] for e in listed] == ["Nguyen"]
        one = c.get("/v1/lexicon/en-us/nguyen", headers=auth(alice_ro))
        assert one.status_code == 200 and one.json()["respelling"] == "nwin"
        # Bob sees none of it and cannot delete it.
        assert c.get("/v1/lexicon", headers=auth(bob)).json() == {"entries": []}
        assert c.delete("/v1/lexicon/en-us/Nguyen", headers=auth(bob)).status_code == 404
        # Bad entries: the field is named.
        bad = c.post(
            "/v1/lexicon",
            json={"word": "x", "language": "en-us", "ipa": "a", "respelling": "b"},
            headers=auth(alice_rw),
        )
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "ipa"
        lang = c.post("/v1/lexicon", json={**entry, "language": "ko"}, headers=auth(alice_rw))
        assert lang.status_code == 422 and lang.json()["error"]["field"] == "language"
        assert "en" in lang.json()["error"]["limit"]
        assert c.delete("/v1/lexicon/en-us/Nguyen", headers=auth(alice_rw)).status_code == 204
        assert c.get("/v1/lexicon/en-us/Nguyen", headers=auth(alice_ro)).status_code == 404


def test_the_owners_lexicon_changes_what_is_spoken(client: TestClient, runtime: Any) -> None:
    def phonemes(owner: str) -> str:
        req = SpeechRequest(text="I like tomato.", language="en-us", owner=owner)
        return " ".join(c.phonemes for c in runtime.speech.plan(req)[1])

    body = {"text": "I like tomato.", "voice": "clear_female"}
    before = client.post("/v1/tts", json=body)
    assert before.status_code == 200 and "təmˈATO" in phonemes("local")
    r = client.post("/v1/lexicon", json={"word": "tomato", "language": "en", "ipa": "təˈmɑːtoʊ"})
    assert r.status_code == 201, r.text
    try:
        assert "təˈmɑtO" in phonemes("local")
        assert "təmˈATO" in phonemes("someone-else")  # only the owner's requests change
        after = client.post("/v1/tts", json=body)
        # Not the cached file of the old pronunciation: new audio, spoken anew.
        assert after.status_code == 200 and after.headers["x-cache"] == "miss"
        assert after.content != before.content
    finally:
        client.delete("/v1/lexicon/en/tomato")


def test_a_blend_speaks_between_its_voices_and_is_never_cached(client: TestClient) -> None:
    text = "The weather was calm and the boats stayed in the harbour all day."
    f0 = {}
    for voice in ("clear_female", "clear_male", "clear_female(1)+clear_male(1)"):
        r = client.post("/v1/tts", json={"text": text, "voice": voice})
        assert r.status_code == 200, r.text
        f0[voice] = _median_f0(*_wav(r.content))
    low, high = sorted((f0["clear_female"], f0["clear_male"]))
    blend = f0["clear_female(1)+clear_male(1)"]
    assert low * 1.03 < blend < high * 0.97, f0  # clearly neither voice alone
    again = client.post("/v1/tts", json={"text": text, "voice": "clear_female(1)+clear_male(1)"})
    assert again.headers["X-Cache"] == "miss"  # a deleted part must leave nothing behind
    missing = client.post("/v1/tts", json={"text": "Hi.", "voice": "clear_female+nobody"})
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "voice"
    bad = client.post("/v1/tts", json={"text": "Hi.", "voice": "clear_female(0)+clear_male"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "voice"
