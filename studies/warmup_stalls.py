"""How long does the cloning warm-up hold the GIL while a server serves speech?

A serving process loads what cloning needs (``Runtime.warm_cloning``) in a
low-priority thread after speech is ready (``runtime/background.py``). A low
CPU priority does not stop that thread from holding the GIL, and while it
holds it no request thread can run Python. Here a thread stands in for the
request threads: it asks for the GIL every millisecond and records how long
each wait took, while the warm-up runs exactly as the server runs it. Each
run is a fresh process (imports are what the warm-up spends its time on).

    python studies/warmup_stalls.py [--runs 3]

Writes studies/results/warmup_stalls.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import bench_home, write_result  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "warmup_stalls.json"

CHILD = """
import json, sys, threading, time
from pathlib import Path
from voxclone.bootstrap import build_runtime
from voxclone.config import Settings
from voxclone.runtime.background import run_at_low_priority

runtime = build_runtime(Settings(home=Path(sys.argv[1])), warmup=True, warm_cloning=False)
done, waits = threading.Event(), []

def request_thread():
    last = time.perf_counter()
    while not done.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        waits.append(now - last - 0.001)
        last = now

ticker = threading.Thread(target=request_thread)
ticker.start()
started = time.perf_counter()
run_at_low_priority(runtime.warm_cloning, name="voxclone-load-cloning")
seconds = time.perf_counter() - started
done.set()
ticker.join()
print(json.dumps({
    "warm_cloning_s": seconds,
    "longest_wait_ms": 1000 * max(waits),
    "waits_over_50ms": sum(w > 0.05 for w in waits),
    "waited_s_over_20ms": sum(w for w in waits if w > 0.02),
    "torch_imported": "torch" in sys.modules,
}))
"""


def run_once() -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT / "src")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(bench_home("voxclone-stalls-"))],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def markdown(result: dict[str, Any]) -> str:
    runs = result["runs"]
    keys = ("warm_cloning_s", "longest_wait_ms", "waits_over_50ms", "waited_s_over_20ms")
    lines = [
        f"`{result['command']}`: cloning warm-up in a low-priority thread, a thread asking "
        f"for the GIL every 1 ms; {len(runs)} fresh processes, medians.",
        "",
        "| warm-up s | longest wait ms | waits > 50 ms | s waited in waits > 20 ms "
        "| torch imported |",
        "|---:|---:|---:|---:|---|",
        "| "
        + " | ".join(f"{statistics.median(r[k] for r in runs):.2f}" for k in keys)
        + f" | {'yes' if any(r['torch_imported'] for r in runs) else 'no'} |",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    runs = [run_once() for _ in range(args.runs)]
    result = {
        "command": "python studies/warmup_stalls.py " + " ".join(sys.argv[1:]).strip(),
        "runs": runs,
    }
    write_result(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
