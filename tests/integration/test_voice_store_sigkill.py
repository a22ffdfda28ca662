"""A voice store child killed (SIGKILL) mid-create leaves the whole voice or nothing (moved
from tests/unit/test_voice_store.py, issue 51).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import test_voice_store as unit  # tests/unit (conftest.py)
from test_voice_store import SHAPES, SRC_DIR, style_of  # tests/unit (conftest.py)

from voxclone.runtime.voice_store import (
    SqliteVoiceStore,
)

UNIT = Path(__file__).resolve().parents[1] / "unit"  # a child imports its helpers too

db_path = unit.db_path  # its fixture, defined once there

_CRASH_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    sys.path.insert(0, sys.argv[3])
    from fakes import voice_record
    from test_voice_store import SHAPES
    from voxclone.runtime.voice_store import SqliteVoiceStore

    def stall(step):
        if step == "embedding":
            print("MIDWAY", flush=True)
            time.sleep(60)

    SqliteVoiceStore(Path(sys.argv[1]), style_shapes=SHAPES).create(voice_record(name="Survivor"))
    store = SqliteVoiceStore(Path(sys.argv[1]), style_shapes=SHAPES, statement_hook=stall)
    store.create(voice_record(name="Half", reference_audio=b"audio"))
    """
)


def test_sigkill_mid_create_leaves_whole_voice_or_nothing(db_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CRASH_SCRIPT,
            str(db_path),
            str(SRC_DIR),
            str(UNIT),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "MIDWAY", proc.stderr.read() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    with SqliteVoiceStore(db_path, style_shapes=SHAPES) as s:
        names = [v.name for v in s.list(None)]
        assert names == ["Survivor"]
        survivor = s.list(None)[0].id
        assert style_of(s.get(survivor, None)).shape == (510, 1, 256)
    # No orphan child rows from the half-written voice.
    conn = sqlite3.connect(db_path)
    for table in ("voice_consents", "voice_arrays", "voice_reference_audio"):
        orphans = conn.execute(
            f"SELECT COUNT(*) FROM {table} WHERE voice_id != ?", (survivor,)
        ).fetchone()
        assert orphans == (0,), table
    conn.close()
