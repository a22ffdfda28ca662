"""Files the service creates are private, and its temporary files do not outlive it
(issue 18, finding 6). The process checks run real subprocesses."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
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


def test_fresh_home_from_the_cli_is_private(tmp_path: Path) -> None:
    parent = tmp_path / "shared"
    parent.mkdir(mode=0o755)
    os.chmod(parent, 0o755)
    home = parent / "voxclone-home"  # does not exist yet: the CLI creates it
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; os.umask(0o022); "
            "from voxclone.api.cli import main; sys.exit(main(sys.argv[1:]))",
            "keys",
            "create",
            "--name",
            "ci",
            "--scopes",
            "tts",
        ],
        env=_env(VOXCLONE_HOME=str(home)),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert _mode(home) == 0o700
    db_files = sorted(home.glob("keys.sqlite3*"))
    assert db_files, list(home.iterdir())
    for path in db_files:
        assert _mode(path) == 0o600, (path.name, oct(_mode(path)))


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


_CHILD = """
import glob, os, signal, sys
from voxclone.synth.text.g2p import EspeakG2P
g2p = EspeakG2P({"h": 1, "l": 2})
g2p.phonemize("hello world", "en-us")
g2p.phonemize("bonjour", "fr")
tmp = os.environ["TMPDIR"]
alive = glob.glob(os.path.join(tmp, "**", "libespeak*"), recursive=True)
print("copies while alive:", alive, flush=True)
# What uvicorn does after a graceful shutdown: the signal again, default action.
os.kill(os.getpid(), signal.SIGTERM)
"""


def test_no_espeak_library_copies_survive_sigterm(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # A directory left by a crashed process (a pid that no longer exists).
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp / f"voxclone-espeak-{dead.pid}-abc123" / "tmpx"
    stale.mkdir(parents=True)
    (stale / "libespeak-ng.so").write_bytes(b"\x7fELF stale copy")

    child = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env=_env(TMPDIR=str(tmp)),
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGTERM, child.stderr.decode()[-2000:]
    assert b"copies while alive: []" in child.stdout, child.stdout.decode()
    left = [p for p in tmp.rglob("*") if p.name.startswith("libespeak")]
    assert left == [], left
    assert not stale.parent.exists()  # swept when the child made its own directory


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
