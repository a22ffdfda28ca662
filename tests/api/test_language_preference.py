"""A request without a language speaks short English with a foreign name as
English, so the owner's English lexicon applies: "Mister Nguyen is here." was
detected as French and "Nguyen" (respelled "win") read with French rules."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from voxclone.service.speech.service import SpeechRequest

TEXT = "Mister Nguyen is here."


def _phonemes(runtime: Any, text: str, language: str | None) -> str:
    req = SpeechRequest(text=text, language=language, owner="local")
    return " ".join(chunk.phonemes for chunk in runtime.speech.plan(req)[1])


def test_lexicon_applies_to_short_english_without_a_language(
    client: TestClient, runtime: Any
) -> None:
    service, routed = runtime.speech.route(SpeechRequest(text=TEXT, owner="local"))
    assert service.language_of(routed) == "en-us"
    entry = {"word": "Nguyen", "language": "en", "respelling": "win"}
    assert client.post("/v1/lexicon", json=entry).status_code == 201
    try:
        respelled = _phonemes(runtime, "Mister win is here.", "en-us")
        assert _phonemes(runtime, TEXT, "en-us") == respelled
        # The README's example, as a user sends it: no language named.
        assert _phonemes(runtime, TEXT, None) == respelled
    finally:
        client.delete("/v1/lexicon/en/Nguyen")
