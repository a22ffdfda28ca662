"""serve() refuses unsafe exposure; ``voxclone keys`` manages keys."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from voxclone.api.cli_exit import EXIT_CANNOT_LISTEN
from voxclone.api.cli_keys import add_keys_parser, cmd_keys
from voxclone.api.server import check_exposure, is_loopback, serve
from voxclone.config import Settings
from voxclone.devserver import free_loopback_port
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
        f"sys.exit(main(['serve', '--host', '0.0.0.0', '--port', '{free_loopback_port()}']))"
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
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets=None: setattr(self, "should_exit", True)
    )
    # Port 0: any free one (serve binds it before anything else).
    settings = Settings(home=tmp_path, host="0.0.0.0", port=0, bootstrap_admin_key=True)
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


def _held_port() -> socket.socket:
    """A loopback port another process (here: this one) listens on."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    return holder


@pytest.mark.timed
def test_a_taken_port_fails_before_anything_loads(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46: uvicorn tried the port only after the app's start-up, printed
    "Application startup complete", a raw Errno 98 and went on loading the
    models for ~6 s. Now the port is bound first: one line naming --port, exit
    4, and the app (whose start loads the models) is never built."""
    import voxclone.api.app

    def no_app(settings: Settings) -> Any:
        raise AssertionError("built the app (and started loading the models) on a taken port")

    monkeypatch.setattr(voxclone.api.app, "create_app", no_app)
    with _held_port() as holder:
        port = holder.getsockname()[1]
        started = time.perf_counter()
        code = serve(Settings(home=tmp_path, port=port))
        elapsed = time.perf_counter() - started
    err = capsys.readouterr().err
    assert code == EXIT_CANNOT_LISTEN == 4
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"port {port} is in use on 127.0.0.1" in lines[0] and "--port N" in lines[0]
    assert elapsed < 2.0, elapsed


def test_a_taken_port_in_a_subprocess_is_one_line_and_exit_4(tmp_path: Path) -> None:
    with _held_port() as holder:
        port = holder.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "voxclone.api.cli", "serve", "--port", str(port)],
            env={**os.environ, "VOXCLONE_HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"voxclone: error: port {port} is in use on 127.0.0.1 (another voxclone serve?); "
        "stop that process or use --port N (VOXCLONE_PORT)"
    ]
    assert proc.stdout == ""


def test_serve_listens_on_the_socket_it_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket bound before the app is built is the one uvicorn serves on."""
    import types

    import uvicorn

    import voxclone.api.app

    fake_app = types.SimpleNamespace(state=types.SimpleNamespace())
    monkeypatch.setattr(voxclone.api.app, "create_app", lambda s: fake_app)
    served: list[tuple[Any, Any]] = []

    def run(self: Any, sockets: Any = None) -> None:
        served.extend((sock, sock.getsockname()) for sock in sockets or [])
        self.should_exit = True

    monkeypatch.setattr(uvicorn.Server, "run", run)
    assert serve(Settings(home=tmp_path, port=0)) == 0
    ((sock, (host, port)),) = served
    assert host == "127.0.0.1" and port > 0
    assert sock.fileno() == -1  # closed once the server stopped
