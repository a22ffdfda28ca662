"""Every test module's file name is unique across tests/.

pytest imports test modules by basename (rootdir-relative "prepend" import
mode, no __init__.py files), so two folders holding test_x.py stop the whole
run at collection ("import file mismatch"): a fresh-clone CI run failed that
way when tests/api and tests/unit both gained test_cli_local_hint.py.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_name() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
