"""Run every benchmark script, then regenerate docs/benchmarks.md and its plots.

bench/ holds what this runs (and its helpers): the product's current figures.
One-off studies that informed a choice live in studies/ (index: studies/README.md).

    python bench/run_all.py [--quick] [--only rtf peers ...] [--skip load ...]

Each script runs as its own subprocess with the quick or full arguments below.
A missing, failing or timed-out script does not stop the others: its status
and last error line are recorded in run_all.json, and the page says so in
place of its section; the run then prints each failure's last lines and exits
1, so ``make bench`` fails too (issue 46: 4 of 5 quick benchmarks failed on a
fresh clone and make exited 0).

Without ``--publish`` nothing tracked is written: the scripts write into
``bench/out`` (git-ignored; bench/out_paths.py), which starts as a copy of
bench/results so the page there still shows every section. ``--publish``
writes bench/results, docs/benchmarks.md and docs/img, to be committed.

``--quick`` aims at under 10 minutes on two cores; scripts without a quick
mode are skipped there and their previous result, if any, is reused (the
page's "Scripts of the last `bench/run_all.py` run" table says which).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import render_page  # noqa: E402
from out_paths import OUT_ENV, UNPUBLISHED  # noqa: E402

# Lines of a failed script's stderr printed on the terminal (all of it is in its log).
ERROR_TAIL_LINES = 20
OK_STATUSES = ("ok", "skipped")


@dataclass(frozen=True)
class Script:
    name: str  # the result's file stem in bench/results
    path: str  # relative to the repository root
    full_args: tuple[str, ...]
    quick_args: tuple[str, ...] | None  # None: too slow for the quick run, skipped there
    full_timeout_s: float
    quick_timeout_s: float = 180.0


SCRIPTS: tuple[Script, ...] = (
    Script("rtf", "bench/rtf.py", (), ("--quick",), 1800, 240),
    Script("peers", "bench/peers.py", (), ("--quick",), 2700, 360),
    Script("ttfa", "bench/ttfa.py", (), ("--quick",), 1200, 180),
    Script("load", "bench/load.py", (), ("--quick",), 1800, 180),
    # Simulated users at 1-32 (quick: 1-8, 20 s each) and identical bursts.
    Script("users", "bench/users.py", (), ("--quick",), 1800, 600),
    # Quick runs reuse the full clone evaluation: a 2-speaker, 15 s-refine run
    # would overwrite it with numbers too noisy to compare.
    Script(
        "clone_eval",
        "bench/clone_eval.py",
        (),
        None,
        7200,
        240,
    ),
    Script("soak", "bench/soak.py", (), None, 900),
    # 30 minutes of a book through the job and streaming routes and the peers,
    # drift per ~28 s window (issue 50): ~45 min on 2 idle cores (RTF ~0.3 per
    # render), hours when they are shared (RTF ~4 at load 7: docs/benchmarks.md).
    Script("long_form", "bench/long_form.py", (), None, 3 * 3600),
    # Every built-in voice in its language (DNSMOS, WER, rate, pitch): ~15 min.
    Script("voice_table", "bench/voice_table.py", (), None, 3600),
    Script("controls", "bench/controls_eval.py", (), None, 1800),
    # Product figures measured against a fresh server; full runs only.
    Script("startup", "bench/startup.py", (), None, 1200),
    Script("overload", "bench/overload.py", (), None, 1200),
    Script("clone_latency", "bench/clone_latency.py", (), None, 1800),
    Script("word_timestamps", "bench/word_timestamps.py", (), None, 1800),
    Script("engines_speed", "bench/engines_speed.py", (), None, 3600),
    # Voice agents (issue 48): simulated LLM into 1-4 stream-input sessions.
    Script("realtime", "bench/realtime.py", (), None, 3600),
    # Output watermark (issue 49): robustness, false positives, quality, cost.
    Script("watermark", "bench/watermark.py", (), ("--quick",), 1800, 600),
)


def run_script(
    script: Script, quick: bool, timeout_scale: float = 1.0, results: Path = RESULTS
) -> dict[str, Any]:
    args = script.quick_args if quick else script.full_args
    command = " ".join(["python", script.path, *(args or ())])
    if args is None:
        return {
            "command": command,
            "status": "skipped in --quick (previous result reused if present)",
            "seconds": None,
            "error": None,
        }
    if not (ROOT / script.path).exists():
        return {
            "command": command,
            "status": "missing",
            "seconds": None,
            "error": "script not in this tree",
        }
    timeout = (script.quick_timeout_s if quick else script.full_timeout_s) * timeout_scale
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, script.path, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {
            "command": command,
            "status": f"timed out after {timeout:.0f} s",
            "seconds": round(time.perf_counter() - started, 1),
            "error": None,
        }
    seconds = round(time.perf_counter() - started, 1)
    log = results / "logs" / f"{script.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no error output"]
        return {
            "command": command,
            "status": f"failed (exit {proc.returncode})",
            "seconds": seconds,
            "error": lines[-1][:300],
            "stderr_tail": lines[-ERROR_TAIL_LINES:],
            "log": str(log),
        }
    return {"command": command, "status": "ok", "seconds": seconds, "error": None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="the short variant (< 10 min on 2 cores)"
    )
    parser.add_argument("--only", nargs="+", default=None, help="run only these result names")
    parser.add_argument("--skip", nargs="+", default=[], help="do not run these result names")
    parser.add_argument(
        "--timeout-scale", type=float, default=1.0, help="multiply every script's timeout"
    )
    parser.add_argument(
        "--publish",
        action="store_true",
        help="write the tracked results (bench/results, docs/benchmarks.md, docs/img) "
        "instead of bench/out/",
    )
    parser.add_argument("--out", type=Path, default=None, help="the page (default: by --publish)")
    parser.add_argument("--img", type=Path, default=None, help="plots (default: by --publish)")
    args = parser.parse_args(argv)
    root = ROOT if args.publish else unpublished_root()
    results = root / "bench" / "results"
    out = args.out or root / "docs" / "benchmarks.md"
    img = args.img or root / "docs" / "img"
    results.mkdir(parents=True, exist_ok=True)
    statuses: dict[str, Any] = {}
    for script in SCRIPTS:
        if (args.only and script.name not in args.only) or script.name in args.skip:
            continue
        print(f"== {script.name}", flush=True)
        statuses[script.name] = run_script(script, args.quick, args.timeout_scale, results)
        print(
            f"   {statuses[script.name]['status']} ({statuses[script.name]['seconds']} s)",
            flush=True,
        )
    (results / "run_all.json").write_text(
        json.dumps({"quick": args.quick, "scripts": statuses}, indent=1)
    )
    render_page.render(results, out, img)
    print("wrote", out)
    return report_failures(statuses)


def unpublished_root() -> Path:
    """bench/out, holding a fresh copy of the tracked results; the scripts are
    pointed at it through the environment their subprocesses inherit."""
    if UNPUBLISHED.exists():
        shutil.rmtree(UNPUBLISHED)
    shutil.copytree(
        RESULTS, UNPUBLISHED / "bench" / "results", ignore=shutil.ignore_patterns("logs")
    )
    os.environ[OUT_ENV] = str(UNPUBLISHED)
    return UNPUBLISHED


def report_failures(statuses: dict[str, Any]) -> int:
    """Each failed, missing or timed-out script with its error on stderr; 1 if any."""
    failed = {
        name: s for name, s in statuses.items() if not str(s["status"]).startswith(OK_STATUSES)
    }
    for name, status in failed.items():
        print(f"\nbenchmark {name} {status['status']}: {status['command']}", file=sys.stderr)
        for line in status.get("stderr_tail") or [status.get("error") or "(no error output)"]:
            print(f"  {line}", file=sys.stderr)
        if status.get("log"):
            print(f"  (whole output: {status['log']})", file=sys.stderr)
    if failed:
        print(f"\n{len(failed)} of {len(statuses)} benchmarks failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
