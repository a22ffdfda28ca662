"""The benchmark page (rendered with git and uname children) has the voice-table section (moved
from tests/unit/test_voice_table_bench.py, issue 51: tests/unit runs no subprocess or server).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from test_voice_table_bench import ROWS  # noqa: E402  (it also puts bench/ on the path)


def test_the_page_has_the_voice_table_section(tmp_path: Path) -> None:
    table = importlib.import_module("voice_table")
    render_page = importlib.import_module("render_page")
    defaults = table.choose_defaults(ROWS)
    result = {
        "command": "python bench/voice_table.py",
        "sentences": {"en-us": ["a"] * 6, "es": ["b"] * 3},
        "rows": ROWS,
        "defaults": defaults,
        "openai": table.choose_openai(ROWS, defaults),
    }
    results = tmp_path / "results"
    results.mkdir()
    (results / "voice_table.json").write_text(json.dumps(result))
    (results / "voice_table.md").write_text(table.markdown(result))
    text = render_page.render(results, tmp_path / "benchmarks.md", tmp_path / "img")
    section = text[text.index("## Voice table") :]
    assert "Produced by `python bench/voice_table.py`" in section
    # One row per language: its default, and how many native voices it was chosen among.
    assert "| en-us | **af_heart** | 4.30 | 0.0% | 6 | 3.50–4.50 |" in section
    assert "| fr | **ff_siwis** | 3.80 | 30.0% | 1 | — |" in section
    assert "| alloy | af_heart | 4.30 | 0.0% |" in section
    assert "[voice_table.md](results/voice_table.md)" in section  # every voice: linked
    assert "## Other results" not in text  # not listed twice
