"""Every user mistake is one line on stderr and a documented exit code
(issue 46): ``voxclone clone missing.wav`` printed a Python traceback, and a
server that is not there exited 1 like a server error."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxclone.api import cli
from voxclone.api.cli_exit import EXIT_UNREACHABLE, EXIT_USAGE
from voxclone.devserver import free_loopback_port


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "home"))
    # In-process: a voxclone server running on this machine must not answer.
    monkeypatch.setattr("voxclone.api.cli_remote.server_ready", lambda *a, **k: False)

    def no_models(*args: object, **kwargs: object) -> None:
        raise AssertionError("loaded the models for a command that had to stop first")

    monkeypatch.setattr("voxclone.bootstrap.build_runtime", no_models)


def test_a_missing_recording_is_one_line_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.wav"
    assert cli.main(["clone", str(missing), "--name", "alice", "--consent"]) == EXIT_USAGE
    line = _one_line(capsys.readouterr().err)
    assert line == f"voxclone: error: no such recording: {missing}"


def test_a_recording_that_cannot_be_read_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "takes"
    folder.mkdir()
    assert cli.main(["clone", str(folder), "--name", "alice", "--consent"]) == EXIT_USAGE
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"voxclone: error: cannot read the recording {folder}: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["say", "Hello.", "-o", "{out}", "--server", "{url}"],
        ["clone", "{clip}", "--name", "alice", "--consent", "--server", "{url}"],
    ],
)
def test_a_server_that_is_not_there_is_exit_3_and_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    url = f"http://127.0.0.1:{free_loopback_port()}"  # nothing listens there
    clip = tmp_path / "clip.wav"
    clip.write_bytes(b"RIFF")
    values = {"out": str(tmp_path / "x.wav"), "url": url, "clip": str(clip)}
    assert cli.main([arg.format(**values) for arg in argv]) == EXIT_UNREACHABLE
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"voxclone: error: no voxclone server answers at {url} (")
    assert "voxclone serve" in line and "urlopen error" not in line


def test_an_unwritable_output_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file-system error the commands do not expect (here: ``--subtitles``
    into a folder that does not exist) is one line naming the path, not a traceback."""
    from voxclone.api import cli_say_remote
    from voxclone.api.cli_remote import RemoteAudio

    answer = b'{"audio": "UklGRg==", "content_type": "audio/wav", "timestamps": []}'
    monkeypatch.setattr(cli_say_remote, "speak_remote", lambda url, body: RemoteAudio(answer, ""))
    subtitles = tmp_path / "nowhere" / "x.srt"
    argv = ["say", "Hi.", "-o", str(tmp_path / "x.wav"), "--subtitles", str(subtitles)]
    assert cli.main([*argv, "--server", "http://127.0.0.1:9"]) == EXIT_USAGE
    line = _one_line(capsys.readouterr().err)
    assert line == f"voxclone: error: {subtitles}: No such file or directory"


def test_the_exit_codes_are_in_the_help() -> None:
    text = cli._parser().format_help()
    assert "exit codes:" in text
    for code in ("0", "1", "2", "3", "4", "130"):
        assert f"\n  {code} " in text, code
