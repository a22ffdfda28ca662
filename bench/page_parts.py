"""What render_page.py needs to keep docs/benchmarks.md short, dated and open-ended.

* :func:`result_dates`: when each result in ``bench/results`` was produced, so
  every table on the page carries a date (results come from different runs);
* :func:`excerpt`: a result's own Markdown cut at block boundaries to a line
  budget, with a link to the whole file;
* :func:`is_study_result`: results in ``bench/results`` that studies read
  (``clone_eval.py`` runs on the fit and validation speakers); the page points
  to docs/studies.md for them instead of repeating them;
* :func:`other_results`: every other result the page has no section for, newest
  first, each excerpted to an equal share of the lines left, so a new result
  file appears on the page without editing this code.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# The page's length limit (issue 39: "docs/benchmarks.md <= 400 lines").
PAGE_LINES = 400
# Lines an entry of "Other results" gets with an excerpt (heading, command, link),
# and at most; with less room than that each entry is its heading and its command
# with the link (3 lines), so the page keeps its length however many results.
MIN_ENTRY_LINES = 6  # heading, command, link and the blank lines between
MAX_ENTRY_LINES = 30

# bench/clone_eval.py's runs on the fit and validation speakers: the inputs of
# the stock comparison's studies (studies/stock_preference.py, stock_listener.py,
# report_calibration.py; docs/studies.md tells what they found). The page keeps
# the test split's score (clone_catalog_test). The studies' own results are in
# studies/results, which the page does not read.
STUDY_RESULT_PATTERNS = (
    "clone_catalog_fit",
    "clone_catalog_validation",
    "clone_catalog_singles",
)


def is_study_result(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in STUDY_RESULT_PATTERNS)


def _git(results_dir: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(results_dir), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%MZ")


def result_dates(results_dir: Path, data: dict[str, Any]) -> dict[str, str]:
    """Result name -> when it was produced.

    A result that records its own time (``"when"`` in its JSON) says so; one
    committed and unchanged since dates from its last commit; anything else (a
    fresh run not yet committed, a folder outside git) from its file's mtime.
    """
    files = sorted(p for p in results_dir.glob("*") if p.suffix in (".json", ".md"))
    committed: dict[str, str] = {}
    log = _git(results_dir, "log", "--format=%x00%cI", "--name-only", "--", ".")
    changed = _git(results_dir, "status", "--porcelain", "--untracked-files=all", "--", ".")
    top = _git(results_dir, "rev-parse", "--show-toplevel")
    if log is not None and changed is not None and top is not None:
        root = Path(top.strip())
        dirty = {(root / line[3:].strip()).resolve() for line in changed.splitlines() if line}
        when = ""
        for line in log.splitlines():
            if line.startswith("\x00"):
                when = line[1:]
                continue
            path = (root / line.strip()).resolve() if line.strip() else None
            if path is not None and path not in dirty and str(path) not in committed:
                committed[str(path)] = _stamp(dt.datetime.fromisoformat(when))
    dates: dict[str, str] = {}
    for path in files:
        stamp = committed.get(str(path.resolve())) or _stamp(
            dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)
        )
        dates[path.stem] = max(dates.get(path.stem, ""), stamp)
    for name, result in data.items():
        if isinstance(result, dict) and isinstance(result.get("when"), str):
            dates[name] = result["when"]
    return dates


def _blocks(markdown: str) -> list[list[str]]:
    """Paragraphs and tables (runs of non-blank lines), a heading glued to what follows."""
    blocks: list[list[str]] = [[]]
    for line in markdown.strip().splitlines():
        if line.strip():
            blocks[-1].append(line)
        elif len(blocks[-1]) == 1 and blocks[-1][0].startswith("#"):
            blocks[-1].append("")  # a heading stays with its block, blank line kept
        elif blocks[-1] and blocks[-1][-1]:
            blocks.append([])
    return [b for b in blocks if b]


def _is_table(block: list[str]) -> bool:
    return any(line.startswith("|") for line in block)


def excerpt(markdown: str, budget: int, link: str, plots: str = "") -> str:
    """What of ``markdown`` fits ``budget`` lines, then a line linking ``link``.

    Whole blocks, in their order; the first table comes first (it holds the
    figures; a long one keeps its header and first rows), then the other blocks
    while they fit (blank lines between blocks count). ``plots``: links added
    to that last line.
    """
    blocks = _blocks(markdown)
    total = sum(len(b) for b in blocks) + max(0, len(blocks) - 1)
    also = f"; plot: {plots}" if plots else ""
    if total <= budget:
        return markdown.strip() + (f"\n\n_Plot: {plots}._\n" if plots else "\n")
    room = max(1, budget - 2)  # the link line and the blank before it
    chosen: dict[int, list[str]] = {}
    first_table = next((i for i, b in enumerate(blocks) if _is_table(b)), None)
    if first_table is not None and room >= 3:  # header, separator and one row fit
        block = blocks[first_table]
        head = [line for line in block if not line.startswith("|")]
        rows = [line for line in block if line.startswith("|")]
        keep = max(3, room - len(head))  # header, separator, at least one row
        chosen[first_table] = head + rows[:keep] if len(block) > room else block
    for i, block in enumerate(blocks):
        used = sum(len(b) + 1 for b in chosen.values())
        if i not in chosen and used + len(block) + 1 <= room + 1:
            chosen[i] = block
    if not chosen:  # no room for any block: the link alone
        return f"_{total} lines in [{Path(link).name}]({link}){also}._\n"
    taken = "\n\n".join("\n".join(chosen[i]) for i in sorted(chosen))
    left = total - (taken.count("\n") + 1)
    return taken + f"\n\n_{left} more lines in [{Path(link).name}]({link}){also}._\n"


def other_results(
    names: Iterable[str],
    markdown: dict[str, str],
    dates: dict[str, str],
    produced: Any,
    link: Any,
    lines_left: int,
    demote: Any,
    plots: Any,
    note: str = "",
) -> str:
    """One entry per result the page has no section for, newest first, sharing
    ``lines_left`` equally (at least MIN_ENTRY_LINES, at most MAX_ENTRY_LINES each).

    ``produced(name)`` gives the entry's "Produced by ..." line, ``link(name, suffix)``
    the page-relative link to its file, ``demote(text)`` nests its headings and
    ``plots(name)`` links to the plots the result's script drew (or ""), ``note``
    ends the section's opening line.
    """
    ordered = sorted(names, key=lambda n: (dates.get(n, ""), n), reverse=True)
    if not ordered:
        return ""
    header = f"## Other results\n\nResults without a section of their own, newest first.{note}\n"
    # Every part below ends with a newline and is joined by one more (a blank line).
    per_entry = (lines_left - header.count("\n") - 2) // len(ordered)
    parts = [header]
    if per_entry < MIN_ENTRY_LINES:
        # Too many results for an excerpt each: heading and command, and the
        # link on the command's line (3 lines an entry, with the blank one).
        for name in ordered:
            more = plots(name)
            linked = f"[{name}.md]({link(name, '.md')})" + (f"; plot: {more}" if more else "")
            command = produced(name).rstrip().removesuffix(":")
            parts.append(f"### {name}\n{command}: {linked}\n")
        return "\n".join(parts)
    share = min(MAX_ENTRY_LINES, per_entry)
    for name in ordered:
        head = f"### {name}\n" + produced(name) + "\n"
        body = share - head.count("\n") - 1
        more = plots(name)
        parts.append(head + excerpt(demote(markdown[name]), body, link(name, ".md"), more))
    return "\n".join(parts)


def relative_link(out_page: Path, target: Path) -> str:
    return os.path.relpath(target, out_page.parent)
