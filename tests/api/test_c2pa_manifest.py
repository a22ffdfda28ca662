"""Whole-file outputs carry a signed C2PA manifest and plain tags, and
``/v1/provenance/detect`` and ``voxclone detect`` verify it (issue 49).

The shared runtime signs with the key its home made at start (Settings
default: c2pa_manifest on, no operator certificate). c2pa's own Reader is the
judge of validity here, not our reading code.
"""

from __future__ import annotations

import io
import json
import stat
import sys
from pathlib import Path
from typing import Any

import av
import c2pa
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.api.job_polling import job_audio

from voxclone.api.cli import main as cli_main
from voxclone.runtime.signing_key import KEY_FILE, load_generated, provenance_dir
from voxclone.service.c2pa_manifest import AI_SOURCE_TYPE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from fakes import voice_record  # noqa: E402

TEXT = "This sentence was made by a machine, and its file says so."
OWNER = "c2pa49"
MIME = {"wav": "audio/wav", "mp3": "audio/mpeg", "flac": "audio/flac"}


@pytest.fixture()
def app(make_app: Any) -> FastAPI:
    return make_app(rate_limit_per_minute=0)


def _headers(app: FastAPI) -> dict[str, str]:
    plaintext, _ = app.state.keys.create("test", {"tts", "voices:read"}, owner=OWNER)
    return {"Authorization": f"Bearer {plaintext}"}


def _tts(c: TestClient, headers: dict[str, str], fmt: str, **extra: Any) -> bytes:
    r = c.post("/v1/tts", json={"text": TEXT, "format": fmt, **extra}, headers=headers)
    assert r.status_code == 200, r.text
    return r.content


def _c2pa_read(data: bytes, fmt: str) -> tuple[str | None, dict[str, Any], list[str]]:
    """(validation state, active manifest, failed codes) as c2pa's Reader says."""
    with c2pa.Reader(MIME[fmt], io.BytesIO(data)) as reader:
        state = reader.get_validation_state()
        manifest = reader.get_active_manifest() or {}
        results = reader.get_validation_results() or {}
    failures = (results.get("activeManifest") or {}).get("failure") or []
    return state, manifest, [f["code"] for f in failures]


def _created(manifest: dict[str, Any]) -> dict[str, Any]:
    actions = next(a for a in manifest["assertions"] if a["label"].startswith("c2pa.actions"))
    return actions["data"]["actions"][0]  # type: ignore[no-any-return]


def _detect(c: TestClient, headers: dict[str, str], audio: bytes, name: str) -> dict[str, Any]:
    r = c.post("/v1/provenance/detect", files={"audio": (name, audio)}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_wav_and_mp3_carry_a_manifest_that_verifies(
    app: FastAPI, app_runtime: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    headers = _headers(app)
    with TestClient(app) as c:
        files = {fmt: _tts(c, headers, fmt) for fmt in ("wav", "mp3")}
        files["job.mp3"] = job_audio(c, {"text": TEXT, "format": "mp3"}, headers)
        for name, data in files.items():
            fmt = name.rsplit(".", 1)[-1]
            state, manifest, failed = _c2pa_read(data, fmt)
            # Valid, not Trusted: a self-signed chain is on no trust list, and
            # that is the only failure c2pa reports.
            assert state == "Valid", (name, failed)
            assert failed == ["signingCredential.untrusted"], name
            created = _created(manifest)
            assert created["action"] == "c2pa.created"
            assert created["digitalSourceType"] == AI_SOURCE_TYPE
            assert created["parameters"]["org.voxclone.model"].startswith("kokoro")
            assert manifest["claim_generator_info"][0]["name"] == "voxclone"

            found = _detect(c, headers, data, name)
            assert found["watermarked"] is True
            m = found["manifest"]
            assert m["present"] and m["valid"] and m["ai_generated"], (name, m)
            assert m["generator"].startswith("voxclone ") and m["model"].startswith("kokoro")
            assert m["voice_ref"].startswith("urn:voxclone:voice:")
            assert "this server's key" in m["signer"] and "not a trust-list signer" in m["signer"]

        # One byte of audio changed: the manifest no longer verifies.
        wav = bytearray(files["wav"])
        wav[len(wav) // 3] ^= 0x01
        state, _, failed = _c2pa_read(bytes(wav), "wav")
        assert state == "Invalid" and "assertion.dataHash.mismatch" in failed
        m = _detect(c, headers, bytes(wav), "changed.wav")["manifest"]
        assert m["present"] and m["valid"] is False
        assert m["problems"] == ["assertion.dataHash.mismatch"]

        # The claim itself edited (the model it names): reported, not trusted.
        mp3 = bytearray(files["mp3"])
        at = mp3.find(b"org.voxclone.model") + len("org.voxclone.model") + 4
        mp3[at] ^= 0x01
        m = _detect(c, headers, bytes(mp3), "edited.mp3")["manifest"]
        assert m["present"] and m["valid"] is False
        assert "assertion.hashedURI.mismatch" in m["problems"]

    # voxclone detect reads the manifest too (a local file: exit 0 when marked).
    path = tmp_path / "tts.mp3"
    path.write_bytes(files["mp3"])
    capsys.readouterr()
    assert cli_main(["detect", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["manifest"]["present"] and out["manifest"]["valid"]
    assert out["manifest"]["ai_generated"] is True


def test_plain_tags_and_which_formats_are_signed(app: FastAPI) -> None:
    headers = _headers(app)
    with TestClient(app) as c:
        wav, mp3, flac = (_tts(c, headers, fmt) for fmt in ("wav", "mp3", "flac"))
        opus = _tts(c, headers, "opus")
        fresh = {"text": "A streamed sentence.", "format": "mp3", "stream": True}
        stream = c.post("/v1/tts", json=fresh, headers=headers).content
        # OpenAI's speech route always streams (chunked, first audio early).
        openai = c.post(
            "/v1/audio/speech",
            json={"model": "kokoro", "input": TEXT, "voice": "clear_female"},
            headers=headers,
        ).content
    for data, key in ((wav, "comment"), (mp3, "comment"), (flac, "COMMENT")):
        with av.open(io.BytesIO(data), mode="r") as container:
            assert container.metadata[key].startswith("AI-generated speech made by voxclone")
            samples = sum(int(f.samples) for f in container.decode(audio=0))
            assert samples > 0  # still plays
    # FLAC keeps its tags but no manifest (c2pa-rs would put an ID3 tag before
    # "fLaC"); Opus gets neither manifest nor tags; streams (the native
    # stream, OpenAI speech) no manifest.
    assert flac[:4] == b"fLaC"
    assert c2pa.Reader.try_create("audio/flac", io.BytesIO(flac)) is None
    with av.open(io.BytesIO(opus), mode="r") as container:
        assert "comment" not in {k.lower() for k in container.metadata}
    assert b"c2pa" not in opus and b"jumb" not in opus  # c2pa-rs has no Ogg binding
    assert c2pa.Reader.try_create("audio/mpeg", io.BytesIO(stream)) is None
    assert c2pa.Reader.try_create("audio/mpeg", io.BytesIO(openai)) is None


def test_voice_reference_names_no_person(app: FastAPI, app_runtime: Any) -> None:
    runtime = app_runtime.current
    alice = runtime.voice_store.create(voice_record("alice", owner=OWNER))
    headers = _headers(app)
    with TestClient(app) as c:
        data = _tts(c, headers, "wav", voice=alice.id)
        again = _tts(c, headers, "wav", voice=alice.id)
        other = _tts(c, headers, "wav")
    ref = _created(_c2pa_read(data, "wav")[1])["parameters"]["org.voxclone.voice_ref"]
    assert ref.startswith("urn:voxclone:voice:")
    assert b"alice" not in data.lower() and alice.id.encode() not in data
    assert alice.id not in ref
    # Stable for a voice, and another voice's differs.
    assert _created(_c2pa_read(again, "wav")[1])["parameters"]["org.voxclone.voice_ref"] == ref
    assert _created(_c2pa_read(other, "wav")[1])["parameters"]["org.voxclone.voice_ref"] != ref


def test_the_signing_key_is_private(app_runtime: Any) -> None:
    home = app_runtime.current.settings.home
    key = provenance_dir(home) / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in key.read_bytes()
    assert load_generated(home) is not None
