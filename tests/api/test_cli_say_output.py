"""``voxclone say -o -`` through a real server (issue 46): the audio goes to
standard output, WAV or with ``--raw`` headerless PCM, like Piper's
``--output-raw`` (it wrote a file named ``-``); ``--subtitles`` names the
audio's content type (it said application/json, the captioned answer's)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from voxclone.api import cli

pytestmark = [pytest.mark.models, pytest.mark.timeout(400)]

TEXT = "Hello from standard output."


def test_say_to_stdout_writes_wav_then_raw_pcm(
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    monkeypatch.chdir(tmp_path)
    with live_server() as server:
        assert cli.main(["say", TEXT, "-o", "-", "--server", server.url]) == 0
        wav = capsysbinary.readouterr()
        assert cli.main(["say", TEXT, "-o", "-", "--raw", "--server", server.url]) == 0
        raw = capsysbinary.readouterr()
    assert not (tmp_path / "-").exists()
    audio, rate = sf.read(io.BytesIO(wav.out), dtype="int16")
    assert rate == 24_000 and 1.0 < audio.size / rate < 4.0
    assert b"wrote standard output" in wav.err and b"audio/wav" in wav.err
    # The same speech without the header: 16-bit little-endian mono samples.
    assert raw.out[:4] != b"RIFF" and len(raw.out) % 2 == 0
    pcm = np.frombuffer(raw.out, "<i2")
    assert abs(pcm.size - audio.size) < rate // 10
    assert float(np.sqrt(np.mean((pcm / 32768.0) ** 2))) > 0.01  # speech, not silence
    assert b"audio/pcm" in raw.err, raw.err


def test_subtitles_through_a_server_name_the_audio_type(
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    out, srt = tmp_path / "x.wav", tmp_path / "x.srt"
    with live_server() as server:
        argv = ["say", TEXT, "-o", str(out), "--subtitles", str(srt), "--server", server.url]
        assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert f"wrote {out} (" in err and "audio/wav" in err, err
    assert "application/json" not in err
    assert sf.info(out).samplerate == 24_000 and "-->" in srt.read_text()
