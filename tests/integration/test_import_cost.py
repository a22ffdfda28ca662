"""What starting voxclone imports: a server or ``say`` without Redis configured
must not pay for the redis package (~0.7 s of `voxclone say`'s start-up on
2 cores, measured with ``python -X importtime``; issue #20), nor for
scipy.signal / scipy.ndimage (~0.8 s, 2.4 s in a busy hour) or pyworld (with
pkg_resources, ~0.15 s), which only cloning and the voice controls use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Top-level packages, or dotted prefixes, that must stay out of sys.modules.
_HEAVY = ("redis", "scipy.signal", "scipy.ndimage", "pyworld")


def _imported_heavy(code: str) -> list[str]:
    return _imported(code, _HEAVY)


def _imported(code: str, heavy: tuple[str, ...]) -> list[str]:
    probe = (
        "import json, sys\n"
        + code
        + f"\nheavy = {heavy!r}\n"
        + "print(json.dumps(sorted(m for m in sys.modules "
        "if any(m == h or m.startswith(h + '.') for h in heavy))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return list(json.loads(out.strip().splitlines()[-1]))


def test_speech_path_and_server_do_not_import_heavy_modules_at_start() -> None:
    code = (
        "import voxclone.api.app, voxclone.api.cli, voxclone.bootstrap, "
        "voxclone.service.speech.service"
    )
    assert _imported_heavy(code) == []


def test_post_processing_of_plain_speech_imports_no_scipy() -> None:
    # Every piece goes through the true-peak limiter, neutral controls included;
    # a speech-like piece peaking at 0.5 (the usual case) needs no gain change.
    code = (
        "import numpy as np\n"
        "from voxclone.synth.audio.post import apply_controls\n"
        "from voxclone.synth.controls import SpeechControls\n"
        "t = np.arange(24000) / 24000\n"
        "piece = (0.5 * np.sin(2 * np.pi * 150 * t) * np.hanning(t.size)).astype(np.float32)\n"
        "out = apply_controls(piece, 24000, SpeechControls().resolve())\n"
        "assert np.allclose(out, piece, atol=1e-7)\n"
    )
    assert _imported_heavy(code) == []


def test_the_cli_parser_imports_no_database_layer() -> None:
    # Every command builds the whole parser; `say` and `clone` through a running
    # server never open a database, and SQLAlchemy + Alembic cost ~0.4 s
    # (python -X importtime) of each such call.
    code = "from voxclone.api.cli import _parser\n_parser()"
    modules = _imported(code, ("sqlalchemy", "alembic"))
    assert modules == []


def test_speech_path_imports_neither_ffmpeg_nor_alembic() -> None:
    # PyAV (~75 ms) only for Opus/AAC/MP4 output; Alembic (~0.13 s) only where a
    # migration runs: a one-shot `voxclone say` to WAV needs neither (issue #20).
    code = "import voxclone.api.cli, voxclone.bootstrap, voxclone.service.speech.service"
    assert _imported(code, ("av", "alembic")) == []


def test_opening_a_current_database_does_not_import_alembic(tmp_path: Path) -> None:
    from voxclone.runtime.db import open_database, sqlite_url, upgrade

    path = tmp_path / "current.sqlite3"
    db = open_database(sqlite_url(path))
    upgrade(db)
    db.close()
    code = (
        "from pathlib import Path\n"
        "from voxclone.runtime.voice_store import SqlVoiceStore\n"
        f"store = SqlVoiceStore(Path({str(path)!r}))\n"
        "store.database.ensure_schema()\n"
    )
    assert _imported(code, ("alembic",)) == []


def test_the_server_imports_no_cryptography_at_start() -> None:
    """Issue 49's receipts and manifests sign with cryptography; at module level
    it cost the start 76-100 ms (service/deletion_receipt.py imported it)."""
    code = "import voxclone.api.app, voxclone.bootstrap"
    assert _imported(code, ("cryptography", "c2pa")) == []
