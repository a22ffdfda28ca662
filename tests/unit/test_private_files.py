"""Files the service creates are private, and its temporary files do not outlive it
(issue 18, finding 6). The process checks run real subprocesses."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import voxclone

# The voxclone the tests imported, so the children run the same code.
SRC = Path(voxclone.__file__).resolve().parents[1]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        **extra,
    }


def test_existing_world_readable_home_is_tightened(tmp_path: Path) -> None:
    home = tmp_path / "old-home"
    (home / "audio-cache").mkdir(parents=True)
    os.chmod(home, 0o755)
    os.chmod(home / "audio-cache", 0o755)
    db = home / "voxclone.sqlite3"
    db.write_bytes(b"")
    os.chmod(db, 0o644)
    from voxclone.runtime.private_home import secure_home

    old_umask = os.umask(0o022)
    try:
        secure_home(home)
        assert _mode(home) == 0o700 and _mode(home / "audio-cache") == 0o700
        assert _mode(db) == 0o600
        created = home / "new.sqlite3"
        created.write_bytes(b"")
        assert _mode(created) == 0o600  # the umask holds for what comes later
    finally:
        os.umask(old_umask)


def test_stale_sweep_keeps_live_and_foreign_directories(tmp_path: Path) -> None:
    from voxclone.synth.text.espeak_temp import PREFIX, remove_stale_dirs

    mine = tmp_path / f"{PREFIX}{os.getpid()}-x"
    mine.mkdir()
    alive = tmp_path / f"{PREFIX}1-x"  # pid 1 is always alive
    alive.mkdir()
    odd = tmp_path / f"{PREFIX}notapid"
    odd.mkdir()
    assert remove_stale_dirs(tmp_path) == []
    assert mine.exists() and alive.exists() and odd.exists()
