"""``voxclone say --stream-in`` (issue 48): standard input spoken as it
arrives, through a real server's stream-input WebSocket."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import soundfile as sf

from voxclone.api import cli

pytestmark = pytest.mark.timed

PIECES = ["Hello there, ", "my good friend. ", "The model is still ", "writing this sentence."]


class _Pipe:
    """Standard input as a pipe the test writes into, piece by piece."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()

    def fileno(self) -> int:
        return self.read_fd

    def write(self, text: str) -> None:
        os.write(self.write_fd, text.encode())

    def close(self) -> None:
        os.close(self.write_fd)


def _grows(path: Path, beyond: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size > beyond:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.models
@pytest.mark.timeout(400)
def test_stream_in_speaks_stdin_before_it_ends(
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    stdin = _Pipe()
    monkeypatch.setattr("sys.stdin", stdin)
    out = tmp_path / "agent.wav"
    heard_early: list[bool] = []

    def llm() -> None:
        try:
            stdin.write(PIECES[0])
            time.sleep(0.2)
            stdin.write(PIECES[1])
            # Audio of the first sentence is in the file while stdin is open.
            heard_early.append(_grows(out, 44 + 4800, 120))
            for piece in PIECES[2:]:
                stdin.write(piece)
                time.sleep(0.1)
        finally:
            stdin.close()

    writer = threading.Thread(target=llm)
    with live_server() as server:
        writer.start()
        code = cli.main(["say", "--stream-in", "-o", str(out), "--server", server.url])
        writer.join()
    err = capsys.readouterr().err
    assert code == 0, err
    assert heard_early == [True]
    assert f"streamed through {server.url}" in err
    audio, rate = sf.read(out, dtype="int16")  # sizes fixed: an ordinary WAV
    assert rate == 24_000 and audio.size / rate > 2.0
    assert sf.info(out).frames == audio.size


def test_stream_in_refuses_what_the_protocol_cannot_carry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    for argv, named in [
        (["--pitch", "2"], "--pitch"),
        (["--format", "flac"], "flac"),
        (["--rate", "11025"], "11025"),
        (["some text"], "standard input"),
    ]:
        code = cli.main(["say", "--stream-in", "-o", str(tmp_path / "x.wav"), "--local", *argv])
        err = capsys.readouterr().err
        assert code == 2 and named in err, (argv, err)
    # Without --stream-in the text is still required.
    assert cli.main(["say", "-o", str(tmp_path / "y.wav")]) == 2
    assert "--stream-in" in capsys.readouterr().err
