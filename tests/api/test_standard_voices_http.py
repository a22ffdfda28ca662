"""Kokoro's standard voices with the real installed packs: every surface speaks them.

Needs the packs ``make install`` fetches (scripts/fetch_voice_packs.py) in the
models folder; without them the module is skipped (the catalog then is the
earlier seven: tests/unit/test_standard_voices.py covers that fallback).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from installed_models import INSTALLED_MODELS
from voxclone.api.app import create_app
from voxclone.bootstrap import Runtime, build_runtime
from voxclone.config import Settings
from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.engine.kokoro.builtin_voices import FALLBACK_COMPARISON_VOICES, earlier_voices
from voxclone.synth.engine.kokoro.standard_voices import LANGUAGE_DEFAULTS
from voxclone.synth.engine.kokoro.voice_packs import load_voice_packs, packs_dir

pytestmark = pytest.mark.models

SPANISH = "El tren de la mañana sale a las siete en punto."


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if len(load_voice_packs(INSTALLED_MODELS)) < 54:
        pytest.skip(
            "Kokoro's standard voice packs are not installed in "
            f"{packs_dir(INSTALLED_MODELS)} (python scripts/fetch_voice_packs.py)"
        )
    home = tmp_path_factory.mktemp("voxclone-standard")
    (home / "models").mkdir()
    packs_dir(home / "models").symlink_to(packs_dir(INSTALLED_MODELS), target_is_directory=True)
    return home


@pytest.fixture(scope="module")
def standard_runtime(home: Path) -> Iterator[Runtime]:
    # Models live apart from the home (issue 46): name the folder with the packs.
    rt = build_runtime(
        Settings(home=home, models_dir=home / "models"), warmup=False, with_voices=False
    )
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture()
def client(standard_runtime: Runtime, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(home=tmp_path / "app", allowed_hosts=["testserver"])
    with TestClient(create_app(settings, runtime=standard_runtime)) as c:
        yield c


def _audio(data: bytes) -> np.ndarray:
    audio, rate = sf.read(io.BytesIO(data), dtype="float32")
    assert rate == 24_000
    return np.asarray(audio)


def test_af_heart_speaks_through_the_service(standard_runtime: Runtime) -> None:
    speech = standard_runtime.speech
    heart = speech.synthesize(SpeechRequest(text="Hello there.", voice="af_heart", format="wav"))
    earlier = speech.synthesize(
        SpeechRequest(text="Hello there.", voice="clear_female", format="wav")
    )
    a, b = _audio(heart.audio), _audio(earlier.audio)
    assert a.size > 0.5 * 24_000 and float(np.sqrt(np.mean(a**2))) > 0.01
    assert a.size != b.size or not np.allclose(a, b)  # another voice, not the old default


def test_af_heart_speaks_over_http(client: TestClient) -> None:
    native = client.post("/v1/tts", json={"text": "Hello there.", "voice": "af_heart"})
    assert native.status_code == 200, native.text
    assert _audio(native.content).size > 0.5 * 24_000
    for voice in ("af_heart", "alloy", "af_bella(2)+af_sky(1)"):
        openai = client.post(
            "/v1/audio/speech",
            json={"model": "tts-1", "input": "Hello there.", "voice": voice},
        )
        assert openai.status_code == 200, (voice, openai.text)
        assert openai.headers["content-type"].startswith("audio/mpeg")
        assert len(openai.content) > 1000


def test_a_spanish_request_without_a_voice_speaks_the_spanish_default(
    standard_runtime: Runtime, client: TestClient
) -> None:
    # route() answers the request resolved once (voice, language, lexicon).
    _, routed = standard_runtime.speech.route(SpeechRequest(text=SPANISH))
    assert routed.voice.id == LANGUAGE_DEFAULTS["es"]
    _, english = standard_runtime.speech.route(SpeechRequest(text="Good morning to you all."))
    assert english.voice.id == LANGUAGE_DEFAULTS["en-us"]
    unnamed = client.post("/v1/tts", json={"text": SPANISH})
    named = client.post("/v1/tts", json={"text": SPANISH, "voice": LANGUAGE_DEFAULTS["es"]})
    other = client.post("/v1/tts", json={"text": SPANISH, "voice": "af_heart"})
    assert unnamed.status_code == named.status_code == other.status_code == 200
    assert np.array_equal(_audio(unnamed.content), _audio(named.content))
    assert unnamed.content != other.content
    # The captioned route names no voice by default: the same default.
    body = {"input": SPANISH, "response_format": "wav"}
    captioned = [
        client.post("/v1/audio/speech/captioned", json=extra)
        for extra in (
            body,
            {**body, "voice": LANGUAGE_DEFAULTS["es"]},
            {**body, "voice": "af_heart"},
        )
    ]
    assert [c.status_code for c in captioned] == [200, 200, 200], captioned[0].text
    unnamed_audio, named_audio, other_audio = (
        _audio(base64.b64decode(c.json()["audio"])) for c in captioned
    )
    assert np.array_equal(unnamed_audio, named_audio)
    assert unnamed_audio.size != other_audio.size or not np.allclose(unnamed_audio, other_audio)


def test_earlier_names_keep_their_exact_style(standard_runtime: Runtime) -> None:
    engine = standard_runtime.engines["kokoro"].engine
    before = earlier_voices(engine.style_packs())  # the shipped five, as before
    for name in FALLBACK_COMPARISON_VOICES:
        resolved = standard_runtime.catalog.resolve(name, None)
        assert resolved.style is not None
        assert np.array_equal(resolved.style, before[name][1]), name


def test_the_listing_has_every_standard_voice_with_language_and_sex(client: TestClient) -> None:
    answer = client.get("/v1/audio/voices")
    assert answer.status_code == 200
    body = answer.json()
    builtins = {v["id"]: v for v in body["voices"] if v["builtin"]}
    assert len(builtins) == 56  # 54 standard voices and the two clear blends
    heart = builtins["af_heart"]
    assert (heart["language"], heart["sex"], heart["accent"]) == ("en-us", "F", "American English")
    assert heart["default_for"] == ["en-us"]
    assert builtins["ef_dora"]["language"] == "es"
    assert builtins["bm_george"]["sex"] == "M"
    assert "yuki" in builtins["jf_gongitsune"]["aliases"]
    assert body["aliases"]["alloy"] == LANGUAGE_DEFAULTS["en-us"]


def test_the_cli_lists_one_language_and_says_af_heart(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from voxclone.api import cli

    monkeypatch.setenv("VOXCLONE_HOME", str(home))
    monkeypatch.setenv("VOXCLONE_MODELS_DIR", str(home / "models"))
    assert cli.main(["voices", "list", "--language", "es"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert listed == {"ef_dora", "em_alex", "em_santa"}
    out = tmp_path / "heart.wav"
    assert cli.main(["say", "Hello there.", "--voice", "af_heart", "-o", str(out), "--local"]) == 0
    assert _audio(out.read_bytes()).size > 0.5 * 24_000
