"""API keys as a new user meets them, against a real ``voxclone`` server process.

Before any key the server is key-less (owner ``local``) and a ``vox_`` key sent
to it is refused, not silently ignored. ``voxclone keys create`` says what now
needs the key and whose voices it sees; a key made with ``--adopt-local``
sees the voices cloned before keys. Revoking the last key locks the server,
and the CLI, the 401 and the start-up log all say so (the log said "every
request runs as 'local'" while every request got 401).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from voxclone.api import cli
from voxclone.api.server import keys_notice
from voxclone.config import Settings
from voxclone.devserver import ServerNotReady, running_server

pytestmark = [pytest.mark.e2e, pytest.mark.models, pytest.mark.timeout(400)]

SCOPES = "tts,voices:read,voices:write"


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, store_style_voice: Any
) -> Iterator[tuple[str, Path]]:
    """A ready server whose home already holds one voice cloned without keys."""
    from voxclone.bootstrap import build_library

    home = tmp_path_factory.mktemp("keys-home")
    library = build_library(Settings(home=home))
    try:
        store_style_voice(
            SimpleNamespace(catalog=library.catalog, voice_store=library.store), "Ada", "local"
        )
    finally:
        library.close()
    try:
        with running_server(home, timeout_s=240) as server:
            yield server.url, home
    except ServerNotReady as exc:
        pytest.fail(str(exc))


def _keys(home: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    monkeypatch.setenv("VOXCLONE_HOME", str(home))
    return cli.main(["keys", *argv])


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _voices(url: str, key: str | None = None) -> httpx.Response:
    return httpx.get(f"{url}/v1/voices", headers=_bearer(key) if key else {}, timeout=30)


def _after_recheck() -> None:
    time.sleep(1.5)  # a running server re-reads "are there keys" once a second


def test_keys_from_none_to_adopted_to_all_revoked(
    served: tuple[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, home = served
    # Key-less: the local voice is there; an unknown vox_ key is refused, an
    # OpenAI client's placeholder is not a key and is ignored.
    assert [v["name"] for v in _voices(url).json()["voices"]] == ["Ada"]
    stray = _voices(url, "vox_" + "A" * 32)
    assert stray.status_code == 401, stray.text
    assert "no API keys" in stray.json()["error"]["message"]
    assert _voices(url, "unused-without-keys").status_code == 200

    # The first key: what needs it now, where it goes, whose voices it sees.
    assert _keys(home, monkeypatch, "create", "--name", "laptop", "--scopes", SCOPES) == 0
    out = capsys.readouterr()
    own_key = out.out.strip()
    assert own_key.startswith("vox_")
    assert "first key" in out.err and "every API request needs a key" in out.err
    assert "Connection settings > API key" in out.err
    assert "Authorization: Bearer" in out.err and "VOXCLONE_API_KEY" in out.err
    assert "(0 voices now)" in out.err
    assert "1 voice cloned without keys" in out.err and "--adopt-local" in out.err
    _after_recheck()
    assert _voices(url).status_code == 401
    assert _voices(url, own_key).json() == {"voices": []}

    # --adopt-local: the voices cloned before keys come along.
    assert (
        _keys(home, monkeypatch, "create", "--name", "mine", "--scopes", SCOPES, "--adopt-local")
        == 0
    )
    out = capsys.readouterr()
    local_key = out.out.strip()
    assert "owner 'local'" in out.err and "1 voice cloned without keys" in out.err
    assert [v["name"] for v in _voices(url, local_key).json()["voices"]] == ["Ada"]

    # Revoking every key locks the server, and each surface says so.
    from voxclone.runtime.keys import KeyStore

    store = KeyStore(Settings(home=home).key_database_target)
    ids = [record.id for record in store.list()]
    store.close()
    for key_id in ids:
        assert _keys(home, monkeypatch, "revoke", key_id) == 0
    err = capsys.readouterr().err
    assert err.count("that was the last active key") == 1
    assert "refuses every API request (401)" in err
    _after_recheck()
    for key in (None, own_key, local_key):
        assert _voices(url, key).status_code == 401
    locked = _voices(url).json()["error"]["message"]
    assert "every key of this server has been revoked" in locked
    notice = keys_notice(Settings(home=home))
    assert notice is not None and "refused (401)" in notice and "runs as 'local'" not in notice


def test_start_up_notice_of_a_home_that_never_had_keys(tmp_path: Path) -> None:
    notice = keys_notice(Settings(home=tmp_path))
    assert notice is not None and "runs as 'local'" in notice
