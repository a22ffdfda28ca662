"""docs/benchmarks.md stays short, dated and open to new results (bench/page_parts.py)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))


def _table(rows: int, label: str = "row") -> str:
    lines = ["| what | value |", "|---|---:|"]
    return "\n".join(lines + [f"| {label} {i} | {i} |" for i in range(rows)])


def test_excerpt_keeps_the_first_table_and_links_the_rest() -> None:
    parts = importlib.import_module("page_parts")
    text = "A long description of the run.\n\n" + _table(40) + "\n\nA closing note."
    cut = parts.excerpt(text, 10, "results/x.md", "[x.png](img/x.png)")
    lines = cut.strip().splitlines()
    assert len(lines) <= 10
    assert lines[0] == "| what | value |" and "| row 0 | 0 |" in lines  # the figures first
    assert "A closing note." not in cut
    assert lines[-1].startswith("_") and "[x.md](results/x.md)" in lines[-1]
    assert "plot: [x.png](img/x.png)" in lines[-1]
    short = "One line.\n\n" + _table(2)
    assert parts.excerpt(short, 10, "results/x.md") == short + "\n"  # fits: unchanged


def test_a_heading_is_never_left_without_its_table() -> None:
    parts = importlib.import_module("page_parts")
    text = "Intro.\n\n## First\n\n" + _table(3) + "\n\n## Second\n\n" + _table(3)
    cut = parts.excerpt(text, 9, "results/x.md")
    assert "## First" in cut and "## Second" not in cut


def _page(results: Path, tmp_path: Path) -> str:
    render_page = importlib.import_module("render_page")
    return render_page.render(results, tmp_path / "docs" / "benchmarks.md", tmp_path / "img")


def test_the_committed_page_is_short_and_every_table_is_dated() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert page.count("\n") <= 400
    for line in page.splitlines():
        if line.startswith("Produced by `"):
            assert "(result of " in line, line
