"""The voxclone CLI as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
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
    out, subtitles = tmp_path / "x.mp3", tmp_path / "x.vtt"
    proc = _run(
        ["say", "-", "-o", str(out), "--voice", "clear_male", "--speed", "1.2", "--local"]
        + ["--subtitles", str(subtitles)],
        tmp_path,
        "Hello from standard input.",
    )
    assert proc.returncode == 0, proc.stderr
    audio, rate = _decode_mp3(out)
    # "Hello from standard input." is about 1.5 s at speed 1; 1.2 makes it shorter.
    assert rate == 24_000 and 0.7 < audio.size / rate < 2.5
    assert float(np.sqrt(np.mean(audio**2))) > 0.01  # speech, not an encoded silence
    # Word-timed WebVTT: one cue with the words as written, inside the audio.
    lines = subtitles.read_text().splitlines()
    assert lines[0] == "WEBVTT" and lines[3] == "Hello from standard input"
    start, _, end = lines[2].partition(" --> ")
    assert start.startswith("00:00:00.") and end < f"00:00:0{audio.size / rate:.3f}"


def test_say_speaks_ssml_with_its_break(tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    text = 'Good morning <break time="900ms"/> <unknown>to you</unknown>.'
    proc = _run(["say", text, "--ssml", "-o", str(out), "--local"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "<unknown> is not supported" in proc.stderr
    audio, rate = sf.read(str(out), dtype="float32")
    frame = rate // 100
    n = len(audio) // frame
    loud = np.sqrt(np.mean(audio[: n * frame].reshape(n, frame) ** 2, axis=1)) > 10 ** (-50 / 20)
    first, last = np.nonzero(loud)[0][[0, -1]]
    inside = loud[first : last + 1]
    longest = max(len(run) for run in "".join("1" if x else "0" for x in inside).split("1"))
    assert longest * 0.01 >= 0.85  # the break, inside the speech


def _decode_mp3(path: Path) -> tuple[np.ndarray, int]:
    """Mono float samples and rate of an MP3 file, decoded by FFmpeg (PyAV)."""
    import av

    with av.open(str(path)) as container:
        assert container.format.name == "mp3", container.format.name
        stream = container.streams.audio[0]
        assert stream.codec_context.name.startswith("mp3")  # FFmpeg: mp3 or mp3float
        frames = [
            frame.to_ndarray().astype(np.float32).reshape(-1) for frame in container.decode(stream)
        ]
        rate = stream.codec_context.sample_rate
    return np.concatenate(frames), rate


@pytest.mark.parametrize(
    ("args", "output", "needle"),
    [
        (["say", ""], "x.wav", "empty"),
        (["say", "hello", "--speed", "9"], "x.wav", "speed"),
        (["say", "hello", "--voice", "nobody"], "x.wav", "not found"),
        (["say", "hello"], "x.xyz", "format"),
        (["say", "Hi <break", "--ssml"], "x.wav", "line 1, column"),
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
        assert name in proc.stdout
    for name in ("clear_female", "clear_male"):
        assert "kokoro" in lines[name]  # the engine that speaks it


REFERENCE = Path(__file__).resolve().parents[1] / "data" / "librispeech_3005-163389-0000.wav"


def test_clone_needs_consent_and_then_stores_the_voice(tmp_path: Path) -> None:
    refused = _run(["clone", str(REFERENCE), "--name", "alice"], tmp_path)
    assert refused.returncode != 0
    lines = [line for line in refused.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "consent" in lines[0].lower(), refused.stderr
    assert "alice" not in _run(["voices", "list"], tmp_path).stdout

    cloned = _run(
        ["clone", str(REFERENCE), "--name", "alice", "--consent", "--given-by", "tester", "--json"],
        tmp_path,
    )
    assert cloned.returncode == 0, cloned.stderr
    voice = json.loads(cloned.stdout)
    assert voice["name"] == "alice" and voice["id"].startswith("v_")
    assert voice["source"] == "instant" and voice["version"] == 1
    assert "style_recipe" not in voice["quality"]
    listed = _run(["voices", "list"], tmp_path).stdout
    assert voice["id"] in listed and "alice" in listed
