"""Where the benchmarks write what they generate (issue 46 item 2).

Results (bench/results) and plots (docs/img) are tracked files: a plain
``make bench-quick`` rewrote them on every run. ``bench/run_all.py`` now
publishes into the tree only with ``--publish``; otherwise it sets
``VOXCLONE_BENCH_OUT`` to an untracked folder (``bench/out``, git-ignored)
and every script writes there, under the same relative paths.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_ENV = "VOXCLONE_BENCH_OUT"
UNPUBLISHED = ROOT / "bench" / "out"


def out_root() -> Path:
    """The repository root when publishing (no VOXCLONE_BENCH_OUT), else that folder."""
    named = os.environ.get(OUT_ENV)
    return Path(named) if named else ROOT


RESULTS_DIR = out_root() / "bench" / "results"
IMG_DIR = out_root() / "docs" / "img"
