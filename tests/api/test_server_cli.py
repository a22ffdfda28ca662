"""serve() refuses unsafe exposure; ``voxclone keys`` manages keys."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from voxclone.api.cli_keys import add_keys_parser, cmd_keys
from voxclone.api.server import check_exposure, is_loopback, serve
from voxclone.config import Settings
from voxclone.runtime.keys import KeyStore


def _keys(argv: list[str], settings: Settings) -> int:
    parser = argparse.ArgumentParser()
    add_keys_parser(parser.add_subparsers(dest="command"))
    return cmd_keys(parser.parse_args(argv), settings)


def test_loopback_detection() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    assert not is_loopback("example.com")


def test_non_loopback_without_keys_refuses_with_exit_2(tmp_path: Path, capsys: Any) -> None:
    assert serve(Settings(home=tmp_path, host="0.0.0.0")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "0.0.0.0" in err and "keys" in err


def test_non_loopback_with_a_key_is_allowed(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, host="0.0.0.0")
    assert _keys(["keys", "create", "--name", "ops", "--scopes", "admin"], settings) == 0
    assert check_exposure(settings) is None


def test_tls_needs_both_files(tmp_path: Path) -> None:
    assert "TLS" in str(check_exposure(Settings(home=tmp_path, ssl_certfile="c.pem")))


def test_cli_refuses_public_bind_in_a_subprocess(tmp_path: Path) -> None:
    code = (
        "import sys; from voxclone.api.cli import main; "
        "sys.exit(main(['serve', '--host', '0.0.0.0']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={
            "VOXCLONE_HOME": str(tmp_path),
            "PYTHONPATH": str(Path("src").resolve()),
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr


def test_keys_create_list_revoke(tmp_path: Path, capsys: Any) -> None:
    settings = Settings(home=tmp_path)
    assert (
        _keys(
            ["keys", "create", "--name", "bot", "--scopes", "tts,voices:read", "--owner", "team"],
            settings,
        )
        == 0
    )
    plaintext = capsys.readouterr().out.strip()
    store = KeyStore(tmp_path / "keys.sqlite3")
    record = store.authenticate(plaintext)
    assert record is not None and record.owner == "team"
    assert record.scopes == {"tts", "voices:read"}
    assert _keys(["keys", "list"], settings) == 0
    listing = capsys.readouterr().out
    assert record.id in listing and plaintext not in listing
    assert _keys(["keys", "revoke", record.id], settings) == 0
    assert store.authenticate(plaintext) is None
    store.close()


def test_keys_create_with_bad_scope_fails(tmp_path: Path) -> None:
    from voxclone.errors import InvalidInput

    with pytest.raises(InvalidInput):
        _keys(["keys", "create", "--name", "x", "--scopes", "root"], Settings(home=tmp_path))


def test_bootstrap_admin_key_lets_a_fresh_server_bind_publicly(tmp_path: Path, capsys: Any) -> None:
    """The container path: first start creates one admin key, shown once, stored hashed."""
    from voxclone.api.first_key import create_first_admin_key

    settings = Settings(home=tmp_path, host="0.0.0.0", bootstrap_admin_key=True)
    created = create_first_admin_key(settings)
    assert created is not None
    plaintext, record = created
    assert record.scopes == {"admin"}
    assert check_exposure(settings) is None
    # Only the hash is stored: the plaintext appears nowhere in the database files.
    for db in tmp_path.glob("keys.sqlite3*"):
        assert plaintext.encode() not in db.read_bytes()
        assert db.stat().st_mode & 0o077 == 0
    store = KeyStore(tmp_path / "keys.sqlite3")
    assert store.authenticate(plaintext) == record
    store.close()
    # A second start creates nothing more.
    assert create_first_admin_key(settings) is None


def test_serve_with_bootstrap_prints_the_key_once_then_never(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    import uvicorn

    import voxclone.api.app

    # Everything of serve() but the model load and the listening socket.
    fake_app = types.SimpleNamespace(state=types.SimpleNamespace())
    monkeypatch.setattr(voxclone.api.app, "create_app", lambda s: fake_app)
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: setattr(self, "should_exit", True))
    settings = Settings(home=tmp_path, host="0.0.0.0", bootstrap_admin_key=True)
    assert serve(settings) == 0
    first = capsys.readouterr().err
    keys = [w for w in first.split() if w.startswith("vox_")]
    assert len(keys) == 1
    store = KeyStore(tmp_path / "keys.sqlite3")
    assert store.authenticate(keys[0]) is not None
    store.close()
    assert serve(settings) == 0
    assert "vox_" not in capsys.readouterr().err


def test_bootstrap_never_reopens_a_server_whose_keys_were_all_revoked(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, host="0.0.0.0", bootstrap_admin_key=True)
    store = KeyStore(tmp_path / "keys.sqlite3")
    _, record = store.create("old", {"tts"})
    store.revoke(record.id)
    store.close()
    assert serve(settings) == 2
    store = KeyStore(tmp_path / "keys.sqlite3")
    assert store.count_active() == 0
    store.close()


def test_bootstrap_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXCLONE_BOOTSTRAP_ADMIN_KEY", "true")
    assert Settings().bootstrap_admin_key is True
    monkeypatch.delenv("VOXCLONE_BOOTSTRAP_ADMIN_KEY")
    assert Settings().bootstrap_admin_key is False
