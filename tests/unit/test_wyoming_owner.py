"""Whose voices ``voxclone wyoming`` offers: decided once at start-up, from a
real key store (Wyoming itself carries no credentials)."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxclone.api.cli import _parser
from voxclone.api.cli_wyoming import exposed_owner
from voxclone.api.wyoming_server import BUILTINS_ONLY
from voxclone.config import Settings
from voxclone.errors import InvalidInput, Unauthorized
from voxclone.runtime.keys import KeyStore


def _owner(settings: Settings, *argv: str) -> str:
    return exposed_owner(_parser().parse_args(["wyoming", *argv]), settings)


def test_the_exposed_owner_comes_from_a_tts_key_or_the_operator(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    store = KeyStore(settings.key_database_target)
    tts_key, tts = store.create("home assistant", {"tts"}, owner="family")
    read_key, _ = store.create("reader", {"voices:read"})
    revoked_key, revoked = store.create("old", {"tts"})
    store.revoke(revoked.id)
    store.close()

    assert _owner(settings) == BUILTINS_ONLY == ""  # default: built-ins only
    assert _owner(settings, "--api-key", tts_key) == tts.owner == "family"
    assert _owner(settings, "--owner", "local") == "local"
    for bad in (read_key, revoked_key, "vox_" + "x" * 32):
        with pytest.raises(Unauthorized):
            _owner(settings, "--api-key", bad)
    with pytest.raises(InvalidInput):
        _owner(settings, "--owner", " ")
    with pytest.raises(SystemExit):  # one owner at most
        _owner(settings, "--owner", "local", "--api-key", tts_key)


def test_a_bad_uri_fails_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from voxclone.api.cli import main

    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path))

    assert main(["wyoming", "--uri", "http://127.0.0.1:10200"]) == 2
    assert "--uri" in capsys.readouterr().err
