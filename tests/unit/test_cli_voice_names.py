"""The CLI finds a voice by name as well as by id, says "did you mean" for a
mistyped one, and speaks of consent in its own flags: ``voices show alice``
failed while ``voices show v_…`` worked, and a clone without ``--consent``
was told to 'send consent="true"' (the HTTP form's field)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from voxclone.api import cli
from voxclone.api.cli_suggest import did_you_mean
from voxclone.config import Settings


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_style_voice: Any) -> Path:
    """A home whose library holds 'Alice' (owner local) and 'Bob' (owner bob)."""
    from voxclone.bootstrap import build_library

    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path))
    # In-process: a voxclone server running on this machine must not answer.
    monkeypatch.setattr("voxclone.api.cli_remote.server_ready", lambda *a, **k: False)
    library = build_library(Settings(home=tmp_path))
    try:
        runtime = SimpleNamespace(catalog=library.catalog, voice_store=library.store)
        store_style_voice(runtime, "Alice", "local")
        store_style_voice(runtime, "Bob", "bob")
    finally:
        library.close()
    return tmp_path


def test_voices_show_finds_a_voice_by_name_and_by_id(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["voices", "show", "Alice", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["name"] == "Alice"
    assert cli.main(["voices", "show", shown["id"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == shown["id"]
    # A name is the owner's: bob's voice by name needs --owner.
    assert cli.main(["voices", "show", "Bob"]) == 2
    assert cli.main(["voices", "show", "Bob", "--owner", "bob"]) == 0


def test_a_mistyped_name_gets_did_you_mean(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["voices", "show", "Alise"]) == 2
    err = capsys.readouterr().err
    assert "not found" in err and "did you mean 'Alice'?" in err
    assert cli.main(["voices", "delete", "alicee"]) == 2
    assert "did you mean 'Alice'?" in capsys.readouterr().err
    # Deleting by name works like showing.
    assert cli.main(["voices", "delete", "Alice"]) == 0
    assert "deleted" in capsys.readouterr().out


def test_did_you_mean_lists_only_close_names() -> None:
    names = ["clear_female", "clear_male", "af_heart", "Alice"]
    assert did_you_mean("clear_femal", names) == "; did you mean 'clear_female' or 'clear_male'?"
    assert did_you_mean("ALICE", names) == "; did you mean 'Alice'?"
    assert did_you_mean("zzz", names) == ""


def test_clone_without_consent_names_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path))
    clip = tmp_path / "a.wav"
    clip.write_bytes(b"RIFF" + b"\0" * 64)
    assert cli.main(["clone", str(clip), "--name", "a"]) == 2
    err = capsys.readouterr().err
    assert "--consent" in err and 'consent="true"' not in err
    empty = ["clone", str(clip), "--name", "a", "--consent", "--consent-statement", " "]
    assert cli.main(empty) == 2
    assert "--consent-statement must not be empty" in capsys.readouterr().err


def test_consent_errors_from_a_server_speak_in_flags() -> None:
    from voxclone.api.cli_clone import _in_flag_terms
    from voxclone.api.cli_remote import RemoteError

    err = _in_flag_terms(
        RemoteError("given_by is longer than 256 characters", 422, field="given_by")
    )
    assert err.message == "--given-by is longer than 256 characters"
    err = _in_flag_terms(
        RemoteError("consent_statement must not be empty", 422, field="consent_statement")
    )
    assert err.message == "--consent-statement must not be empty"
    other = _in_flag_terms(RemoteError("voice not found", 404, field="voice"))
    assert other.message == "voice not found"
