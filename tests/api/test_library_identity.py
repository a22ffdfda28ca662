"""A server names its voice library; the CLI uses a local server it found on
its own only when that library is its VOXCLONE_HOME's (issue 46: a clone
enrolled through a server of another home, then "voice not found" here)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from voxclone.api.cli import main
from voxclone.api.cli_remote import OtherLibrary, server_ready
from voxclone.assembly import Runtime
from voxclone.config import Settings
from voxclone.runtime.library_id import LIBRARY_HEADER, library_id, read_library_id


def _cli_env(monkeypatch: pytest.MonkeyPatch, home: Path, server: Any) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(home))
    monkeypatch.setenv("VOXCLONE_HOST", "127.0.0.1")
    monkeypatch.setenv("VOXCLONE_PORT", str(server.port))
    monkeypatch.delenv("VOXCLONE_API_KEY", raising=False)


def test_the_server_names_its_library(client: TestClient, runtime: Runtime) -> None:
    ready = client.get("/readyz")
    ident = ready.headers[LIBRARY_HEADER]
    assert ident == read_library_id(runtime.settings.home)  # created in its home, 0600
    assert (runtime.settings.home / "library-id").stat().st_mode & 0o077 == 0
    info = client.get("/v1/info").json()["library"]
    assert info == {"id": ident, "home": str(runtime.settings.home)}  # admin (no keys)
    models = ready.json()["detail"]["models"]
    assert models["state"] in ("complete", "degraded")
    assert (models["state"] == "degraded") == bool(models["missing"])


def test_a_shared_database_is_one_library_whatever_the_home(tmp_path: Path) -> None:
    url = "postgresql://vox:secret@127.0.0.1:5432/voxclone"
    same = library_id(tmp_path / "a", url) == library_id(tmp_path / "b", url.replace("secret", "x"))
    assert same and not (tmp_path / "a" / "library-id").exists()
    assert library_id(tmp_path / "a") != library_id(tmp_path / "b")


def test_say_refuses_a_local_server_of_another_home(
    live_server: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    other = tmp_path / "new-home"
    out = tmp_path / "hello.wav"
    with live_server() as server:
        _cli_env(monkeypatch, other, server)
        code = main(["say", "Hello there.", "-o", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        with pytest.raises(OtherLibrary):
            server_ready(server.url, Settings())
    assert code == 2 and not out.exists()
    assert len(err) == 1, err
    line = err[0]
    assert str(other) in line and "its home: " in line  # both homes
    assert f"--server {server.url}" in line and "--local" in line


def test_say_uses_a_local_server_of_its_own_home(
    live_server: Callable[..., Any],
    runtime: Runtime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "hello.wav"
    with live_server() as server:
        _cli_env(monkeypatch, runtime.settings.home, server)
        assert main(["say", "Hello there.", "-o", str(out)]) == 0
        # --server stays the explicit choice, whatever the home.
        monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "new-home"))
        explicit = tmp_path / "explicit.wav"
        assert main(["say", "Hello there.", "-o", str(explicit), "--server", server.url]) == 0
    err = capsys.readouterr().err
    assert f"via {server.url}" in err and out.stat().st_size > 1000 and explicit.exists()
