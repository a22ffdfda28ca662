"""``voxclone say - < chapter.txt`` through a real server: a text too long for the
synchronous route's deadline is spoken anyway (a speech job, or a stream when
subtitles are asked for), with progress on stderr, instead of exiting 2 with
"send at most about N characters".

uvicorn serves the real app on the real runtime (Kokoro) on a loopback port.
How many characters fit the 30 s deadline depends on the machine and its load
(~1,050 on a busy 2-core one), so the server's refusal is reproduced at the
speech service's boundary: a synchronous render (one with a deadline) of more
than :data:`FITS` characters is refused with the 413 that admission sends; a
job (no deadline) renders as usual.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import soundfile as sf

from voxclone.api import cli
from voxclone.api.cli_say_remote import LONG_TEXT_CHARS, finish_wav
from voxclone.errors import PayloadTooLarge

pytestmark = [pytest.mark.models, pytest.mark.timeout(400)]

PARAGRAPH = (
    "The lighthouse keeper climbed the stairs every evening at dusk. "
    "He polished the great lens, trimmed the wick, and wrote the weather in his book. "
    "Ships passed far out at sea, and none of them ever knew his name."
)
FITS = 100


@pytest.fixture()
def deadline_refuses_long_text(runtime: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    render = runtime.speech.synthesize

    def synthesize(req: Any, **kwargs: Any) -> Any:
        # The route passes the request it resolved once (ResolvedRequest wraps
        # the SpeechRequest); jobs and the CLI pass a plain SpeechRequest.
        text = getattr(req, "request", req).text
        if kwargs.get("deadline") is not None and len(text) > FITS:
            raise PayloadTooLarge(
                f"this text needs at least 40 s of synthesis, more than the request "
                f"deadline of 30 s; send at most about {FITS} characters, or submit it as "
                "a speech job (POST /v1/jobs/speech)",
                field="text",
                limit=FITS,
                value=len(text),
            )
        return render(req, **kwargs)

    monkeypatch.setattr(runtime.speech, "synthesize", synthesize)


def _say(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str, args: list[str]) -> int:
    """``voxclone say - ARGS`` with ``text`` on standard input."""
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    return cli.main(["say", "-", *args])


def test_text_too_long_for_the_deadline_becomes_a_speech_job(
    deadline_refuses_long_text: None,
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert len(PARAGRAPH) < LONG_TEXT_CHARS  # the server's 413 is what switches
    out = tmp_path / "chapter.wav"
    with live_server() as server:
        code = _say(monkeypatch, tmp_path, PARAGRAPH, ["-o", str(out), "--server", server.url])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "speech job" in err and "speaking" in err and "100.0 %" in err, err
    assert "speaking it as a long text instead" in err  # the server's reason, as a note
    audio, rate = sf.read(out)
    assert rate == 24_000
    assert 8.0 < len(audio) / rate < 40.0, len(audio) / rate


def test_long_text_with_subtitles_is_streamed_with_word_times(
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A text above LONG_TEXT_CHARS goes to the long path without asking
    # /v1/tts first; lowered here so that a paragraph is one.
    monkeypatch.setattr("voxclone.api.cli_say_remote.LONG_TEXT_CHARS", 100)
    out = tmp_path / "chapter.wav"
    srt = tmp_path / "chapter.srt"
    with live_server() as server:
        code = _say(
            monkeypatch,
            tmp_path,
            PARAGRAPH,
            ["-o", str(out), "--subtitles", str(srt), "--server", server.url],
        )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "streamed" in err, err
    info = sf.info(out)
    # The streamed WAV's open-ended sizes were set: the header's length is the file's.
    assert info.frames > 8 * 24_000 and info.duration < 40.0
    subtitles = srt.read_text()
    assert "lighthouse" in subtitles and "knew his name" in subtitles
    assert subtitles.count("-->") >= 4


def test_finish_wav_sets_the_sizes_of_an_open_ended_header() -> None:
    buf = io.BytesIO()
    sf.write(buf, [0.0] * 480, 24_000, format="WAV", subtype="PCM_16")
    closed = buf.getvalue()
    data_at = closed.index(b"data")
    open_ended = bytearray(closed)
    open_ended[4:8] = b"\xff\xff\xff\xff"
    open_ended[data_at + 4 : data_at + 8] = b"\xff\xff\xff\xff"
    assert finish_wav(bytes(open_ended)) == closed
    assert finish_wav(b"ID3 not a wav") == b"ID3 not a wav"
