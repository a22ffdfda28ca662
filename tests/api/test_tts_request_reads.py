"""One ``/v1/tts`` request resolves each of its parts once (issue 39).

Through the HTTP app on the shared real runtime (SQLite store): the
database's statements are counted as SQLAlchemy sends them, so a second
lookup of a voice, or a second read of the caller's lexicon, shows up
however the code reaches the store. The body's JSON parses and the engine
picks are counted at the functions that do them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from voxclone.bootstrap import Runtime
from voxclone.runtime.voice_store.validation import name_key
from voxclone.synth.text.lexicon import Pronunciation

OWNER = "local"  # the caller of an app without API keys
NAMES = ("Reads Ann", "Reads Bea", "Reads Cy")
WORD = "Zorvex"


@dataclass
class Reads:
    """What one request asked of the database and of the edge."""

    by_name: Counter[str] = field(default_factory=Counter)  # voice lookups by name
    voice_loads: int = 0  # whole voice records read (one consent row each)
    lexicon: int = 0  # reads of the caller's lexicon
    json_parses: int = 0  # parses of the request body
    engine_picks: int = 0  # SpeechRouter.engine_for calls

    def counts(self) -> dict[str, object]:
        """All of them at once, so a failure shows every count."""
        return {
            "json_parses": self.json_parses,
            "engine_picks": self.engine_picks,
            "by_name": dict(self.by_name),
            "voice_loads": self.voice_loads,
            "lexicon": self.lexicon,
        }


@pytest.fixture(scope="module")
def stored(runtime: Runtime, store_style_voice: Callable[..., Any]) -> Iterator[list[str]]:
    """Three stored voices and one lexicon entry of the keyless caller."""
    records = [store_style_voice(runtime, name, OWNER) for name in NAMES]
    assert runtime.lexicon is not None
    runtime.lexicon.put(OWNER, Pronunciation(WORD, "en-us", respelling="zor vex"))
    try:
        yield [r.id for r in records]
    finally:
        runtime.lexicon.delete(OWNER, "en-us", WORD)
        for record in records:
            runtime.voice_store.delete(record.id, OWNER)


@pytest.fixture()
def reads(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> Iterator[Reads]:
    counted = Reads()
    engine = runtime.database.engine

    def statement(conn: Any, cursor: Any, sql: str, params: Any, context: Any, many: Any) -> None:
        text = " ".join(sql.split())
        if "FROM lexicon_entries" in text and text.startswith("SELECT"):
            counted.lexicon += 1
        elif "FROM voices" in text and "name_key" in text and text.startswith("SELECT"):
            keys = [p for p in (params if isinstance(params, tuple | list) else ()) if p]
            counted.by_name.update(k for k in keys if isinstance(k, str) and k != OWNER)
        elif "FROM voice_consents" in text and text.startswith("SELECT"):
            counted.voice_loads += 1

    loads = json.loads

    def parse(raw: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(raw, bytes | str) and WORD.encode() in (
            raw if isinstance(raw, bytes) else raw.encode()
        ):
            counted.json_parses += 1
        return loads(raw, *args, **kwargs)

    pick = runtime.speech.engine_for

    def engine_for(model: str | None) -> str | None:
        counted.engine_picks += 1
        return pick(model)

    monkeypatch.setattr(json, "loads", parse)
    monkeypatch.setattr(runtime.speech, "engine_for", engine_for)
    event.listen(engine, "before_cursor_execute", statement)
    try:
        yield counted
    finally:
        event.remove(engine, "before_cursor_execute", statement)


@pytest.fixture(scope="module")
def client(runtime: Runtime, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    from voxclone.api.app import create_app
    from voxclone.config import Settings

    home = tmp_path_factory.mktemp("reads-app")
    # A generous deadline: this is about reads, not admission on a busy machine.
    app = create_app(
        Settings(home=home, allowed_hosts=["testserver"], request_deadline_s=600.0),
        runtime=runtime,
    )
    with TestClient(app) as c:
        yield c


def _post(client: TestClient, body: dict[str, Any]) -> None:
    r = client.post("/v1/tts", json=body)
    assert r.status_code == 200, r.text
    assert r.content[:4] == b"RIFF"


def test_plain_text_with_a_stored_voice_and_a_lexicon_entry_resolves_each_once(
    client: TestClient, stored: list[str], reads: Reads
) -> None:
    _post(client, {"text": f"{WORD} reads plain text once.", "voice": NAMES[0]})
    assert reads.counts() == {
        "json_parses": 1,
        "engine_picks": 1,
        "by_name": {name_key(NAMES[0]): 1},
        "voice_loads": 1,
        "lexicon": 1,
    }


def test_ssml_switching_to_two_stored_voices_resolves_each_voice_once(
    client: TestClient, stored: list[str], reads: Reads
) -> None:
    text = (
        f"<speak>{WORD} opens.<voice name='{NAMES[1]}'>Then the second voice.</voice>"
        f"<voice name='{NAMES[2]}'>And the third one.</voice></speak>"
    )
    _post(client, {"text": text, "voice": NAMES[0]})
    assert reads.counts() == {
        "json_parses": 1,
        "engine_picks": 1,
        "by_name": {name_key(n): 1 for n in NAMES},
        "voice_loads": 3,
        "lexicon": 1,
    }


def test_a_built_in_voice_reads_no_voice_and_the_lexicon_once(
    client: TestClient, stored: list[str], reads: Reads
) -> None:
    _post(client, {"text": f"{WORD} with a built-in voice.", "voice": "clear_female"})
    assert reads.counts() == {
        "json_parses": 1,
        "engine_picks": 1,
        "by_name": {},
        "voice_loads": 0,
        "lexicon": 1,
    }


# -- the OpenAI transports: /v1/audio/speech and the captioned route ------------
# Both map OpenAI's voice names, which needs the voice looked up in the route;
# the router is handed what the route found (before: looked up again, so each
# stored voice was read twice per request).


def _stored_voice_reads(reads: Reads) -> dict[str, object]:
    return {k: v for k, v in reads.counts().items() if k in ("by_name", "voice_loads", "lexicon")}


def test_openai_speech_with_a_stored_voice_looks_it_up_once(
    client: TestClient, stored: list[str], reads: Reads
) -> None:
    r = client.post(
        "/v1/audio/speech",
        json={
            "model": "tts-1",
            "input": f"{WORD} speaks through OpenAI's route.",
            "voice": NAMES[0],
            "response_format": "wav",
        },
    )
    assert r.status_code == 200, r.text
    assert r.content[:4] == b"RIFF"
    assert _stored_voice_reads(reads) == {
        "by_name": {name_key(NAMES[0]): 1},
        "voice_loads": 1,
        "lexicon": 1,
    }


@pytest.mark.parametrize("caption_format", ["json", "srt"])
def test_captions_with_a_stored_voice_look_it_up_once(
    client: TestClient, stored: list[str], reads: Reads, caption_format: str
) -> None:
    r = client.post(
        f"/v1/audio/speech/captioned?format={caption_format}",
        json={
            "input": f"{WORD} speaks with captions.",
            "voice": NAMES[1],
            "response_format": "wav",
        },
    )
    assert r.status_code == 200, r.text
    assert WORD in r.text
    assert _stored_voice_reads(reads) == {
        "by_name": {name_key(NAMES[1]): 1},
        "voice_loads": 1,
        "lexicon": 1,
    }


def test_an_openai_voice_name_is_looked_up_once_and_mapped(
    client: TestClient, stored: list[str], reads: Reads
) -> None:
    """``alloy`` is not the caller's voice (one lookup finds none) and speaks
    with the built-in it stands for (no voice record read)."""
    r = client.post(
        "/v1/audio/speech",
        json={
            "model": "tts-1",
            "input": f"{WORD} as alloy.",
            "voice": "alloy",
            "response_format": "wav",
        },
    )
    assert r.status_code == 200, r.text
    assert _stored_voice_reads(reads) == {
        "by_name": {name_key("alloy"): 1},
        "voice_loads": 0,
        "lexicon": 1,
    }
