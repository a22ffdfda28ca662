"""The benchmark page rendered whole: render() asks git for the results' dates and uname
for the machine, child processes (moved from tests/unit/test_bench_page.py, issue 51).
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

from test_bench_page import (  # tests/unit (conftest.py)
    _page,
    _table,
)


def test_a_new_result_file_appears_dated_and_study_results_do_not(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "fresh_bench.json").write_text(json.dumps({"command": "python bench/x.py"}))
    (results / "fresh_bench.md").write_text("# Listener\n\n" + _table(3, "speaker"))
    moment = 1_900_000_000  # 2030-03-17 17:46 UTC
    os.utime(results / "fresh_bench.md", (moment, moment))
    os.utime(results / "fresh_bench.json", (moment, moment))
    (results / "clone_catalog_fit.md").write_text(_table(3, "fold"))
    text = _page(results, tmp_path)
    other = text[text.index("## Other results") :]
    assert "### fresh_bench" in other
    # Outside git the date is the file's: a fresh run is dated when it was written.
    assert "Produced by `python bench/x.py` (result of 2030-03-17 17:46Z):" in other
    assert "| speaker 2 | 2 |" in other
    assert "#### Listener" in other  # its headings nested under the entry
    assert "| fold 0 | 0 |" not in text
    assert "Not shown: `clone_catalog_fit`" in other


def test_the_page_stays_within_its_length_however_many_results(tmp_path: Path) -> None:
    parts = importlib.import_module("page_parts")
    results = tmp_path / "results"
    results.mkdir()
    for i in range(25):
        (results / f"extra_{i:02}.md").write_text(f"Note {i}.\n\n" + _table(30))
    text = _page(results, tmp_path)
    assert text.count("\n") <= parts.PAGE_LINES
    assert all(f"### extra_{i:02}" in text for i in range(25))  # every one still appears
