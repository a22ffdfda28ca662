"""Databases as the last version before Alembic left them (tests/data/pre_alembic).

They were written once by that version's own stores (tests/data/README.md says
how), gzipped; ``expected.json`` holds what those stores returned when they
wrote them, arrays by SHA-256. Tests open a copy with today's stores.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data" / "pre_alembic"
EXPECTED: dict[str, Any] = json.loads((DATA / "expected.json").read_text())


def thaw(name: str, dest: Path) -> Path:
    """Copy the frozen file ``name`` (e.g. ``library.sqlite3``) to ``dest``."""
    with gzip.open(DATA / f"{name}.gz", "rb") as src, dest.open("wb") as out:
        shutil.copyfileobj(src, out)
    return dest


def sha256(array: np.ndarray | None) -> str | None:
    return None if array is None else hashlib.sha256(array.tobytes()).hexdigest()
