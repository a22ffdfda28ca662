"""The voxclone CLI as a user runs it (a real subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

pytestmark = pytest.mark.models


def _run(args: list[str], home: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VOXCLONE_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "voxclone.api.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_say_writes_24k_16bit_mono_speech(tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    proc = _run(["say", "The quick brown fox jumps over the lazy dog.", "-o", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    info = sf.info(str(out))
    assert (info.samplerate, info.channels, info.subtype) == (24_000, 1, "PCM_16")
    assert 1.5 < info.duration < 6


def test_say_reads_stdin_and_other_formats(tmp_path: Path) -> None:
    out = tmp_path / "x.mp3"
    proc = _run(
        ["say", "-", "-o", str(out), "--voice", "clear_male", "--speed", "1.2"],
        tmp_path,
        "Hello from standard input.",
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        out.read_bytes()[:3] in (b"ID3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2")
        or out.stat().st_size > 1000
    )


@pytest.mark.parametrize(
    ("args", "output", "needle"),
    [
        (["say", ""], "x.wav", "empty"),
        (["say", "hello", "--speed", "9"], "x.wav", "speed"),
        (["say", "hello", "--voice", "nobody"], "x.wav", "not found"),
        (["say", "hello"], "x.xyz", "format"),
    ],
)
def test_bad_input_exits_nonzero_with_one_line(
    tmp_path: Path, args: list[str], output: str, needle: str
) -> None:
    proc = _run([*args, "-o", str(tmp_path / output)], tmp_path)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0].lower()


def test_voices_list_names_builtins(tmp_path: Path) -> None:
    proc = _run(["voices", "list"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.strip()}
    for name in ("clear_female", "clear_male", "jm_kumo"):
        assert name in lines
        assert "kokoro" in lines[name]  # the engine that speaks it
