"""``voxclone clone a.wav b.wav`` and ``--add-to``: every file reaches the service."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from voxclone.api import cli
from voxclone.service.voices.request import EnrollRequest


class _Service:
    def __init__(self) -> None:
        self.enrolled: list[EnrollRequest] = []
        self.added: list[tuple[str, str, list[bytes]]] = []

    def enroll(self, req: EnrollRequest) -> tuple[Any, None]:
        self.enrolled.append(req)
        return _record("v_new", req.name, 1), None

    def add_recordings(self, voice_id: str, owner: str, audio: list[bytes]) -> Any:
        self.added.append((voice_id, owner, audio))
        return _record(voice_id, "alice", 2)


def _record(voice_id: str, name: str, version: int) -> Any:
    return SimpleNamespace(
        id=voice_id,
        name=name,
        version=version,
        source="instant",
        quality={},
        engine="kokoro",
        model_id="kokoro",
        model_version="1",
        language="en-us",
        created_at="2025-01-01T00:00:00Z",
        updated_at="2025-01-01T00:00:00Z",
        has_reference_audio=False,
    )


@pytest.fixture()
def service(monkeypatch: pytest.MonkeyPatch) -> _Service:
    svc = _Service()
    store = SimpleNamespace(
        find_by_name=lambda name, owner: _record("v_alice", name, 1) if name == "alice" else None
    )
    runtime = SimpleNamespace(voices=svc, voice_store=store, close=lambda: None)
    monkeypatch.setattr("voxclone.bootstrap.build_runtime", lambda *a, **k: runtime)
    # In-process: a voxclone server running on this machine must not answer for it.
    monkeypatch.setattr("voxclone.api.cli_remote.server_ready", lambda *a, **k: False)
    return svc


def _clips(tmp_path: Path, count: int) -> list[str]:
    paths = []
    for i in range(count):
        path = tmp_path / f"clip{i}.wav"
        path.write_bytes(b"RIFF" + bytes([i]) * 64)
        paths.append(str(path))
    return paths


def test_clone_sends_every_file_as_one_voice(service: _Service, tmp_path: Path) -> None:
    paths = _clips(tmp_path, 3)
    assert cli.main(["clone", *paths, "--name", "alice", "--consent"]) == 0
    req = service.enrolled[-1]
    assert req.audio == Path(paths[0]).read_bytes()
    assert list(req.extra_audio) == [Path(p).read_bytes() for p in paths[1:]]


def test_add_to_resolves_the_name_and_adds_the_files(service: _Service, tmp_path: Path) -> None:
    paths = _clips(tmp_path, 2)
    assert cli.main(["clone", *paths, "--add-to", "alice"]) == 0
    voice_id, owner, audio = service.added[-1]
    assert voice_id == "v_alice" and owner == "local" and len(audio) == 2
    assert service.enrolled == []


@pytest.mark.parametrize("extra", [[], ["--name", "x", "--add-to", "alice"]])
def test_name_or_add_to_is_required(service: _Service, tmp_path: Path, extra: list[str]) -> None:
    assert cli.main(["clone", *_clips(tmp_path, 1), *extra]) == 2
    assert service.enrolled == [] and service.added == []
