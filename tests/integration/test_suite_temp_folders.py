"""The test session's own temporary models folder is gone once pytest exits.

Stop 54's CI failed with "database or disk is full": every pytest run had left
its ``voxclone-test-models-*`` folder (Kokoro's 218 MB assembly) in /tmp.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_a_pytest_run_removes_its_models_folder(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "VOXCLONE_MODELS_DIR"}
    env["TMPDIR"] = str(tmp_path)
    # Collecting this file loads tests/conftest.py (which makes the folder)
    # without running anything, so the child pytest is quick and never recurses.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--collect-only",
            "-p",
            "no:cacheprovider",
            __file__,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not list(tmp_path.glob("voxclone-test-models-*"))
