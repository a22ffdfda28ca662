"""``voxclone lexicon add | list | remove`` on a real home, and ``voxclone say`` speaking
an entry added that way.

``say --local`` runs in process on the session's runtime (the same home), handed
to it through the CLI's own runtime seam (``cli._runtime``) so the model is not
loaded again; everything else (argument parsing, the store, the frontend, the
engine) is the real thing.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from voxclone.api import cli
from voxclone.service.speech.service import SpeechRequest

TEXT = "I like tomato."


class _Borrowed:
    """The session runtime, which ``say`` must not close when it is done."""

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)

    def close(self) -> None:
        pass


@pytest.fixture()
def home(voxclone_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VOXCLONE_HOME", str(voxclone_home))
    monkeypatch.delenv("VOXCLONE_DATABASE_URL", raising=False)
    return voxclone_home


def _phonemes(runtime: Any, owner: str) -> str:
    req = SpeechRequest(text=TEXT, language="en-us", owner=owner)
    return " ".join(c.phonemes for c in runtime.speech.plan(req)[1])


def test_lexicon_cli_changes_what_say_speaks(
    home: Path,
    runtime: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert "təmˈATO" in _phonemes(runtime, "local")
    assert cli.main(["lexicon", "add", "tomato", "təˈmɑːtoʊ"]) == 0
    try:
        assert cli.main(["lexicon", "add", "Nguyen", "win", "--respelling", "--lang", "en-gb"]) == 0
        capsys.readouterr()
        assert cli.main(["lexicon", "list"]) == 0
        listed = capsys.readouterr().out.splitlines()
        assert [line.split()[:2] for line in listed] == [["en", "tomato"], ["en-gb", "Nguyen"]]
        assert "/təˈmɑːtoʊ/" in listed[0] and "'win'" in listed[1]
        assert cli.main(["lexicon", "remove", "nguyen", "--lang", "en-gb"]) == 0
        # Bad input: one line naming the problem, nothing stored.
        assert cli.main(["lexicon", "add", "x", "a", "--lang", "ko"]) == 2
        assert "language 'ko' is not supported" in capsys.readouterr().err
        assert cli.main(["lexicon", "add", "x", "[a]"]) == 2
        assert cli.main(["lexicon", "remove", "nguyen", "--lang", "en-gb"]) == 2
        assert "no lexicon entry" in capsys.readouterr().err

        # The runtime on this home now speaks the entry, for the CLI's owner only...
        assert "təˈmɑtO" in _phonemes(runtime, "local")
        assert "təmˈATO" in _phonemes(runtime, "someone-else")
        # ...and `voxclone say` (owner local) is that speech, not the default one.
        monkeypatch.setattr(cli, "_runtime", lambda settings, **kw: _Borrowed(runtime))
        out = tmp_path / "say.wav"
        args = ["say", TEXT, "-o", str(out), "--local", "--voice", "clear_female"]
        assert cli.main(args) == 0
        said, _ = sf.read(out, dtype="float32")
        plain = runtime.speech.synthesize(
            SpeechRequest(text=TEXT, voice="clear_female", owner="someone-else", format="wav")
        )
        default, _ = sf.read(io.BytesIO(plain.audio), dtype="float32")
        assert said.shape != default.shape or not np.allclose(said, default, atol=1e-3)
    finally:
        cli.main(["lexicon", "remove", "tomato"])
    assert "təmˈATO" in _phonemes(runtime, "local")
