"""``voxclone say --voice`` with a mistyped name, through a real HTTP server:
the error names the close voices the server offers ("did you mean")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from voxclone.api import cli


def test_say_with_a_mistyped_voice_suggests_the_close_names(
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    out = tmp_path / "x.wav"
    with live_server() as server:
        code = cli.main(
            ["say", "Hi.", "-o", str(out), "--voice", "clear_femal", "--server", server.url]
        )
    err = capsys.readouterr().err
    assert code == 2, err
    assert "'clear_femal' not found" in err and "did you mean 'clear_female'" in err
    assert not out.exists()
