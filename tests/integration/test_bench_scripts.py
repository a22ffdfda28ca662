"""The benchmark scripts and page as make runs them, with their child processes: a
python per script, git for the results' dates (moved from tests/unit/test_bench_smoke.py,
issue 51).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_bench_smoke import (  # tests/unit (conftest.py)
    BENCH,
    _fake_results,
    _users_level,
)


def test_compare_prints_deltas_of_numeric_leaves(tmp_path: Path) -> None:
    old = {
        "rtf": {"5s": 0.5, "30s": 0.4},
        "runs": [{"p50": 2.0}],
        "ok": True,
        "name": "a",
        "gone": 1,
    }
    new = {
        "rtf": {"5s": 0.25, "30s": 0.4},
        "runs": [{"p50": 3.0}],
        "ok": False,
        "name": "b",
        "new": 7,
    }
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "compare.py"),
            str(tmp_path / "old.json"),
            str(tmp_path / "new.json"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    lines = proc.stdout.splitlines()
    assert "rtf.5s: 0.5 -> 0.25 (-0.25, -50.0%)" in lines
    assert "runs[0].p50: 2 -> 3 (+1, +50.0%)" in lines
    assert "gone: 1 -> (removed)" in lines
    assert "new: (added) -> 7" in lines
    assert not any(
        line.startswith(("rtf.30s", "ok", "name")) for line in lines
    )  # unchanged / not numbers


def test_run_all_fails_loudly_and_writes_nothing_tracked_unless_publishing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46: a failing benchmark left make exiting 0, its reason only in a
    JSON file, and tracked files rewritten."""
    run_all = importlib.import_module("run_all")
    out_paths = importlib.import_module("out_paths")
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nprint('working', file=sys.stderr)\nimport no_such_module_46\n")
    script = run_all.Script("broken", str(broken), (), ("--quick",), 60, 60)
    monkeypatch.setattr(run_all, "SCRIPTS", (script,))
    unpublished = tmp_path / "out"
    monkeypatch.setattr(run_all, "UNPUBLISHED", unpublished)
    monkeypatch.setenv(out_paths.OUT_ENV, "restored-after-the-test")
    tracked = run_all.RESULTS / "run_all.json"
    before = tracked.read_bytes() if tracked.exists() else None
    assert run_all.main(["--quick"]) == 1
    err = capsys.readouterr().err
    assert "benchmark broken failed (exit 1)" in err
    assert "No module named 'no_such_module_46'" in err and "working" in err
    assert (unpublished / "docs" / "benchmarks.md").exists()
    assert json.loads((unpublished / "bench" / "results" / "run_all.json").read_text())
    assert (tracked.read_bytes() if tracked.exists() else None) == before
    assert os.environ[out_paths.OUT_ENV] == str(unpublished)  # what the scripts inherit


def test_render_page_writes_all_sections_into_tmp_paths(tmp_path: Path) -> None:
    render_page = importlib.import_module("render_page")
    results, page, img = (
        tmp_path / "results",
        tmp_path / "docs" / "benchmarks.md",
        tmp_path / "docs" / "img",
    )
    _fake_results(results)
    text = render_page.render(results, page, img)
    assert page.read_text() == text
    for section in (
        "## Machine",
        "## Speed",
        "## Voice table",
        "## Cloning",
        "## Controls",
        "## Load",
        "## Cache",
    ):
        assert section in text
    assert "Produced by `python bench/rtf.py --quick`" in text
    assert "Produced by `python bench/peers.py --quick`" in text
    assert "| instant clone | 2 | 2.00 | 2.50 |" in text
    assert "| instant | 0.700 |" in text  # clone_eval.md merged verbatim
    assert (
        "failed (exit 1)" in text and "ValueError: no controls" in text
    )  # a failing script is reported
    assert "_Not available: `python bench/controls_eval.py` failed (exit 1)" in text
    assert "### Load test" in text  # the script's own H1 nested under "## Load"
    assert "| 4 | 1.00 | 10.00 | 10.0 | 2.000 | 0.100 | hit 30 |" in text  # cache hit vs miss
    assert "| path | plan | queue | engine | post |" in text  # first-audio stages
    assert "| service | 0.010 | 0.000 | 0.420 | 0.020 |" in text
    assert {p.name for p in img.glob("*.png")} >= {
        "rtf_vs_length.png",
        "ttfa_hist.png",
        "ttfa_stages.png",
        "peers.png",
        "clone_similarity.png",
    }
    merged = json.loads((results / "all.json").read_text())
    assert set(merged["results"]) == {"rtf", "peers", "ttfa", "clone_eval", "load"}
    assert merged["machine"]["cores_total"] >= 1


def test_render_page_shows_the_users_capacity_table_and_plot(tmp_path: Path) -> None:
    from users_report import Sample, find_capacity, summarize_burst

    render_page = importlib.import_module("render_page")
    levels = [
        _users_level(1, [200] * 3),
        _users_level(2, [200] * 5),
        _users_level(4, [200] * 6 + [503] * 2),
    ]
    levels[0]["loadavg_1m"] = 1.5
    burst = summarize_burst("whole", 16, [Sample("whole", "short", 60, 200, 1.5)] * 16, 1, 1)
    result = {
        "command": "python bench/users.py --quick",
        "when": "2030-01-02 03:04 UTC",
        "config": {"deadline_s": 30.0, "client_timeout_s": 40.0, "think_s": 5.0},
        "levels": levels,
        "bursts": [burst],
        "capacity": find_capacity(levels),
    }
    results = tmp_path / "results"
    results.mkdir()
    (results / "users.json").write_text(json.dumps(result))
    page, img = tmp_path / "docs" / "benchmarks.md", tmp_path / "docs" / "img"
    text = render_page.render(results, page, img)
    section = text[text.index("## Many users: capacity") :]
    assert "Produced by `python bench/users.py --quick`" in section
    assert "Measured 2030-01-02 03:04 UTC." in section
    assert "**Capacity: 2 users**" in section
    assert "(users: load): 1: 1.5." in section
    assert "| 4 | 8 | 6 | 2 | 0 | 0 | 0 | 0 | 2.00 | 2.00 |" in section
    assert "| whole | 16 | 16 × 200 | 1.50 | 1 | 1 |" in section
    assert "![many users: latency and outcomes per level](img/users.png)" in section
    assert (img / "users.png").stat().st_size > 0
