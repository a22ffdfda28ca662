"""``voxclone voices show`` and ``voxclone clone`` print what a person reads
(issue 46: ~100 lines of JSON, 54 prosody weights among them, with the one
sentence a user wants, the verdict, buried); ``--json`` the whole record."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from voxclone.api import cli
from voxclone.config import Settings

VERDICT = (
    "speaks as the built-in voice af_heart, given this recording's tone: it is heard about "
    "as close to the reference as the clone (similarity 0.80 for the clone, 0.79 for af_heart; "
    "a clone is kept when it is heard closer by more than 0.03)"
)
# What enrollment stores: the report, the style recipe (54 standard packs) and its bookkeeping.
QUALITY = {
    "similarity": 0.7912,
    "wer": 0.0667,
    "warnings": ["the recording is noisy (SNR 14 dB); a quieter room gives a cleaner voice"],
    "reference_seconds": 12.31,
    "snr_db": 14.2,
    "reference_pitch_hz": 187.5,
    "stock_voice": "af_heart",
    "stock_similarity": 0.7912,
    "verdict": VERDICT,
    "gain_over_stock": 0.0,
    "style_recipe": {
        "timbre_weights": [0.01] * 54,
        "timbre_coeffs": [0.0] * 8,
        "prosody_weights": [0.02] * 54,
    },
    "replaced_by_stock_voice": "af_heart",
    "instant_clone_s": 0.412,
    "tone_match": True,
    "clips": 1,
}


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_style_voice: Any) -> Path:
    from voxclone.bootstrap import build_library

    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path))
    library = build_library(Settings(home=tmp_path))
    try:
        runtime = SimpleNamespace(catalog=library.catalog, voice_store=library.store)
        store_style_voice(runtime, "alice", "local", quality=QUALITY)
    finally:
        library.close()
    return tmp_path


def test_voices_show_prints_the_verdict_and_the_few_figures(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["voices", "show", "alice"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4, lines
    name, verdict, figures, warning = lines
    assert name.startswith("alice (v_") and name.endswith(
        "): version 1, instant clone, kokoro, en-us"
    )
    assert verdict == "S" + VERDICT[1:]
    assert figures == (
        "similarity to the reference 0.79; word error rate 7%; 12.31 s of speech; SNR 14 dB"
    )
    assert warning == f"warning: {QUALITY['warnings'][0]}"  # type: ignore[index]


def test_voices_show_json_is_the_whole_record_without_the_recipe(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["voices", "show", "alice", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["name"] == "alice" and record["version"] == 1 and record["source"] == "instant"
    assert record["engine"] == "kokoro" and record["language"] == "en-us"
    expected = {k: v for k, v in QUALITY.items() if k != "style_recipe"}
    assert record["quality"] == expected


def test_clone_prints_the_new_voice_as_a_summary_and_json_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import soundfile as sf

    voice = SimpleNamespace(
        id="v_new",
        name="alice",
        version=1,
        source="instant",
        quality=QUALITY,
        engine="kokoro",
        model_id="kokoro",
        model_version="1",
        language="en-us",
        created_at="2025-01-01T00:00:00Z",
        updated_at="2025-01-01T00:00:00Z",
        has_reference_audio=False,
    )
    service = SimpleNamespace(enroll=lambda request: (voice, None))
    runtime = SimpleNamespace(voices=service, close=lambda: None)
    monkeypatch.setattr("voxclone.bootstrap.build_runtime", lambda *a, **k: runtime)
    clip = tmp_path / "alice.wav"
    sf.write(clip, [0.0] * 16_000, 16_000)
    argv = ["clone", str(clip), "--name", "alice", "--consent", "--local"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == [
        "alice (v_new): version 1, instant clone, kokoro, en-us",
        "S" + VERDICT[1:],
    ]
    assert "prosody_weights" not in out and len(out.splitlines()) == 4
    assert cli.main([*argv, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["id"] == "v_new" and record["quality"]["verdict"] == VERDICT
    assert "style_recipe" not in record["quality"]
