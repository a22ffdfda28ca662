"""Issue 38 item 4: a ``say`` or ``clone`` that finds no server says so on stderr,
before it spends 8-31 s loading the models itself, and how to avoid the wait.

The probe is real: the configured port is a free loopback port nothing
listens on; stderr is a terminal. The models are not loaded (a stand-in
runtime records what stderr held when it was built, so the line is shown to
come *before* the load). A server that answers gets no such line:
tests/api/test_cli_local_hint_server.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from voxclone.api import cli
from voxclone.devserver import free_loopback_port

SERVE_ADVICE = "`voxclone serve` in another terminal"
LOADING_HERE = "voxclone: loading the models in this process"


class _Load:
    """Stands in for the model load of an in-process command."""

    def __init__(self, capsys: pytest.CaptureFixture[str], url: str) -> None:
        self._capsys = capsys
        self.url = url  # the configured server, which does not answer
        self.stderr_before: list[str] = []  # stderr printed before each load
        self.stderr_after = ""

    def build_runtime(self, *args: Any, **kwargs: Any) -> Any:
        self.stderr_before.append(self._capsys.readouterr().err)
        speech = SimpleNamespace(
            text_size=lambda request: len(request.text),
            synthesize=lambda request, progress=None: SimpleNamespace(
                audio=b"RIFF-audio", content_type="audio/wav"
            ),
        )
        record = SimpleNamespace(
            id="v_new",
            name="alice",
            version=1,
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
        voices = SimpleNamespace(enroll=lambda request: (record, None))
        return SimpleNamespace(speech=speech, voices=voices, close=lambda: None)

    def finish(self) -> str:
        self.stderr_after = self._capsys.readouterr().err
        return "".join(self.stderr_before) + self.stderr_after


class _EngineLoad:
    def __init__(self, settings: Any) -> None:
        pass


@pytest.fixture()
def load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> _Load:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "home"))
    # The configured local server: a loopback port nothing listens on.
    port = free_loopback_port()
    monkeypatch.setenv("VOXCLONE_PORT", str(port))
    monkeypatch.delenv("VOXCLONE_HOST", raising=False)
    monkeypatch.delenv("VOXCLONE_SSL_CERTFILE", raising=False)
    loader = _Load(capsys, f"http://127.0.0.1:{port}")
    monkeypatch.setattr("voxclone.bootstrap.build_runtime", loader.build_runtime)
    monkeypatch.setattr("voxclone.engine_setup.EngineLoad", _EngineLoad)
    return loader


def _at_terminal(monkeypatch: pytest.MonkeyPatch, yes: bool = True) -> None:
    """stderr (pytest's capture, in the test's body) answers isatty() with ``yes``."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: yes)


def _say(tmp_path: Path, *extra: str) -> int:
    return cli.main(["say", "Hello there.", "-o", str(tmp_path / "out.wav"), *extra])


def _clone(tmp_path: Path, *extra: str) -> int:
    clip = tmp_path / "clip.wav"
    clip.write_bytes(b"RIFF" + bytes(64))
    return cli.main(["clone", str(clip), "--name", "alice", "--consent", *extra])


@pytest.mark.parametrize(("command", "expected"), [(_say, "~8-16 s"), (_clone, "~16-31 s")])
def test_no_server_is_said_before_the_models_load(
    load: _Load, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: Any, expected: str
) -> None:
    _at_terminal(monkeypatch)
    assert command(tmp_path) == 0
    before = load.stderr_before[0]
    assert f"voxclone: no voxclone server at {load.url}: loading the models here" in before
    assert expected in before and SERVE_ADVICE in before
    assert load.finish().count(SERVE_ADVICE) == 1


@pytest.mark.parametrize("command", [_say, _clone])
def test_explicit_local_gets_the_wait_but_no_advice(
    load: _Load, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: Any
) -> None:
    _at_terminal(monkeypatch)
    assert command(tmp_path, "--local") == 0
    assert LOADING_HERE in load.stderr_before[0]
    everything = load.finish()
    assert SERVE_ADVICE not in everything and "no voxclone server" not in everything


def test_another_owner_clones_here_without_advice(
    load: _Load, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _at_terminal(monkeypatch)
    # Only the in-process store acts as another owner: no server was asked.
    assert _clone(tmp_path, "--owner", "bob") == 0
    assert LOADING_HERE in load.stderr_before[0]
    assert SERVE_ADVICE not in load.finish()


@pytest.mark.parametrize("command", [_say, _clone])
def test_a_script_gets_no_line(
    load: _Load, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: Any
) -> None:
    # stderr read by a program (a pipe, a log): errors stay one line each.
    _at_terminal(monkeypatch, False)
    assert command(tmp_path) == 0
    assert "loading the models" not in load.finish()
