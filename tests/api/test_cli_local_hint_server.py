"""Issue 38 item 4, the other side: where the configured server answers, ``say``
and ``clone`` go through it and print no "loading the models here" line.

uvicorn serves the real app on the real runtime on a loopback port, which is
made the configured one (VOXCLONE_PORT), so the CLI finds it by its own probe,
without --server. Any model load in the CLI process fails the test. The
no-server and --local lines: tests/unit/test_cli_local_hint.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from voxclone.api import cli

pytestmark = [pytest.mark.models, pytest.mark.timeout(300)]


def _no_load_here(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the CLI loaded the models although a server answered")


def test_a_running_server_gets_no_loading_line(
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    monkeypatch.delenv("VOXCLONE_HOST", raising=False)
    monkeypatch.delenv("VOXCLONE_SSL_CERTFILE", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # where the line would show
    out = tmp_path / "hi.wav"
    not_audio = tmp_path / "not_audio.wav"
    not_audio.write_bytes(b"RIFF" + bytes(64))
    with live_server() as server:
        monkeypatch.setenv("VOXCLONE_PORT", str(server.port))
        # The CLI uses a server it found only when it holds the library of the
        # CLI's home (issue 46): this one's.
        served = server.app.state.runtime.settings
        monkeypatch.setenv("VOXCLONE_HOME", str(served.home))
        if served.database_url:
            monkeypatch.setenv("VOXCLONE_DATABASE_URL", str(served.database_url))
        monkeypatch.setattr("voxclone.bootstrap.build_runtime", _no_load_here)
        monkeypatch.setattr("voxclone.engine_setup.EngineLoad", _no_load_here)
        assert cli.main(["say", "Hi.", "-o", str(out)]) == 0
        said = capsys.readouterr().err
        # The server refuses the upload (not audio): it answered, so no load here either.
        code = cli.main(["clone", str(not_audio), "--name", "x", "--consent", "--no-wait"])
        cloned = capsys.readouterr().err
    assert f"via {server.url}" in said and out.stat().st_size > 1000
    assert code == 2, cloned
    for err in (said, cloned):
        assert "loading the models" not in err and "voxclone serve" not in err
    # The same command once the server is gone: the line, then the load.
    with pytest.raises(AssertionError, match="loaded the models"):
        cli.main(["say", "Hi.", "-o", str(out)])
    assert f"no voxclone server at {server.url}" in capsys.readouterr().err
