"""A blend saved as a library voice, over HTTP on the real Kokoro engine.

The saved voice must speak exactly like the expression it was saved from,
be cached like any stored voice, and disappear (rows and cached audio) with
any voice it was made from (docs/design.md §1.5).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import soundfile as sf
from fastapi.testclient import TestClient

from voxclone.runtime.voice_store import VoiceRecord
from voxclone.synth.audio.tone import GRID_HZ

TEXT = "The boats stayed in the harbour."


def _stored_voice(runtime: Any, store: Any, name: str, owner: str) -> VoiceRecord:
    """A style voice with a tone curve, as enrollment stores one."""
    tone = np.linspace(-4.0, 4.0, GRID_HZ.size).astype(np.float32)
    record: VoiceRecord = store(runtime, name, owner, scale=1.05, tone_db=tone)
    return record


def _audio(r: Any) -> np.ndarray:
    assert r.status_code == 200, r.text
    return np.asarray(sf.read(io.BytesIO(r.content), dtype="float32")[0])


def test_saved_blend_speaks_like_its_expression_and_goes_with_its_parts(
    client: TestClient, runtime: Any, store_style_voice: Any
) -> None:
    part = _stored_voice(runtime, store_style_voice, "blend-part", "local")
    expression = "blend-part(2)+clear_male(1)"
    r = client.post("/v1/voices/blend", json={"name": "my mix", "blend": expression})
    assert r.status_code == 201, r.text
    saved = r.json()
    assert saved["source"] == "blend" and saved["name"] == "my mix"
    parts = saved["quality"]["blend"]["parts"]
    assert [(p["voice"], p["weight"]) for p in parts] == [
        (part.id, round(2 / 3, 6)),
        ("clear_male", round(1 / 3, 6)),
    ]
    # A blend of the saved blend: deleting the cloned part must reach it too.
    r = client.post("/v1/voices/blend", json={"name": "mix of mix", "blend": "my mix+clear_male"})
    assert r.status_code == 201, r.text
    nested = r.json()

    by_name = _audio(client.post("/v1/tts", json={"text": TEXT, "voice": "my mix"}))
    by_expression = _audio(client.post("/v1/tts", json={"text": TEXT, "voice": expression}))
    assert by_name.shape == by_expression.shape
    assert float(np.max(np.abs(by_name - by_expression))) < 1e-3
    again = client.post("/v1/tts", json={"text": TEXT, "voice": saved["id"]})
    assert again.headers["x-cache"] != "miss"  # a stored voice: cached, unlike the expression
    assert saved["id"] in runtime.cache.local_voice_ids()

    deleted = client.delete(f"/v1/voices/{part.id}")
    assert deleted.status_code == 200, deleted.text
    assert sorted(deleted.json()["derived_deleted"]) == sorted([saved["id"], nested["id"]])
    for gone in (saved["id"], nested["id"]):
        assert client.get(f"/v1/voices/{gone}").status_code == 404
    assert saved["id"] not in runtime.cache.local_voice_ids()  # its audio purged at once
    r = client.post("/v1/tts", json={"text": TEXT, "voice": "my mix"})
    assert r.status_code == 404


def test_bad_blends_are_refused_naming_the_field(
    client: TestClient, runtime: Any, store_style_voice: Any
) -> None:
    other = _stored_voice(runtime, store_style_voice, "bobs voice", "bob")
    cases = {
        "clear_female(0)+clear_male": (422, "blend"),
        "clear_female": (422, "blend"),  # one voice is no blend
        "clear_female+nobody": (404, "blend"),
        f"{other.id}+clear_male": (404, "blend"),  # another owner's voice: not found
        "a+b+c+d+e": (422, "blend"),
    }
    for expression, (status, field) in cases.items():
        r = client.post("/v1/voices/blend", json={"name": "x", "blend": expression})
        assert r.status_code == status, (expression, r.text)
        assert r.json()["error"]["field"] == field, expression
    r = client.post("/v1/voices/blend", json={"name": " ", "blend": "clear_female+clear_male"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "name"
    assert "x" not in {v["name"] for v in client.get("/v1/voices").json()["voices"]}
    runtime.voice_store.delete(other.id, None)
