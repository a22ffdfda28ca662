"""Print the change of every numeric value between two benchmark JSON files.

    python bench/compare.py old.json new.json [--all]

Each line is ``path: old -> new (delta, relative %)``, where ``path`` is the
dotted route to the value (list items by index). By default unchanged values
are left out; values present in only one file are listed as added/removed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def numeric_leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    """(dotted path, value) for every int/float leaf; booleans are not numbers here."""
    if isinstance(node, bool):
        return
    if isinstance(node, int | float):
        yield prefix, float(node)
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from numeric_leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from numeric_leaves(value, f"{prefix}[{index}]")


def deltas(old: Any, new: Any, *, include_unchanged: bool = False) -> list[str]:
    before = dict(numeric_leaves(old))
    after = dict(numeric_leaves(new))
    lines = []
    for path in sorted(before.keys() | after.keys()):
        if path not in after:
            lines.append(f"{path}: {before[path]:g} -> (removed)")
        elif path not in before:
            lines.append(f"{path}: (added) -> {after[path]:g}")
        else:
            a, b = before[path], after[path]
            if a == b and not include_unchanged:
                continue
            rel = f"{(b - a) / abs(a):+.1%}" if a and math.isfinite(a) else "n/a"
            lines.append(f"{path}: {a:g} -> {b:g} ({b - a:+.4g}, {rel})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--all", action="store_true", help="also list unchanged values")
    args = parser.parse_args(argv)
    lines = deltas(
        json.loads(args.old.read_text()),
        json.loads(args.new.read_text()),
        include_unchanged=args.all,
    )
    print("\n".join(lines) if lines else "no numeric differences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
