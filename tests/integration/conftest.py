"""tests/integration: tests that start a child process, listen on a socket or
load a model (tests/unit runs none of these; its guard says so).

Several were split from a unit test file and still use its helpers, imported by
the unit module's name (``from test_ge2e import ...``): tests/unit goes on
``sys.path`` here, once, before any of them is collected."""

from __future__ import annotations

import sys
from pathlib import Path

UNIT_TESTS = Path(__file__).resolve().parents[1] / "unit"
if str(UNIT_TESTS) not in sys.path:
    sys.path.insert(0, str(UNIT_TESTS))
