"""Enrollment latency through a warm server: when can a new voice speak?

Starts ``voxclone serve`` on a throw-away home, waits until cloning is ready,
then enrolls one recording per evaluation speaker through ``POST /v1/voices``
the two ways the API offers, interleaved per clip:

* ``wait=false`` — seconds until the answer (the voice is stored and can
  speak) and until its report job has finished (pitch calibration, tone
  match and quality report; the voice is then version 2);
* ``wait=true`` (the default) — seconds until the answer, which carries the
  full report.

Upload included (the client is on the same machine, as the CLI is).
Clips come from the evaluation data (``--evaldata``, default ../shared/evaldata);
without it, the two clips in tests/data.

    python bench/clone_latency.py [--clips 10]

Writes bench/results/clone_latency.json, .md and docs/img/clone_latency.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from out_paths import IMG_DIR, RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import RATE_LIMIT_OFF, save_figure, throwaway_server  # noqa: E402
from startup import SERVE  # noqa: E402
from voxclone.api.cli_remote import call_json  # noqa: E402

RESULTS = RESULTS_DIR / "clone_latency.json"
MARKDOWN = RESULTS.with_suffix(".md")
PLOT = IMG_DIR / "clone_latency.png"
DEFAULT_EVALDATA = ROOT.parent / "shared" / "evaldata"
TARGET_S = 1.5  # issue #17: instant clone end to end on a warm server
FORM = [("consent", "true"), ("consent_statement", "benchmark speaker, public dataset")]


def clips(evaldata: Path, count: int) -> list[Path]:
    """The first recording of up to ``count`` speakers, in manifest order."""
    manifest = evaldata / "manifest.json"
    if not manifest.exists():
        return sorted((ROOT / "tests" / "data").glob("*.wav"))[:count]
    seen: set[str] = set()
    chosen = []
    for entry in json.loads(manifest.read_text())["files"]:
        if entry["speaker"] not in seen and entry.get("language", "en") == "en":
            seen.add(entry["speaker"])
            chosen.append(evaldata / entry["file"])
    return chosen[:count]


def _cloning_ready(url: str, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/readyz?capability=cloning", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise RuntimeError("cloning never became ready")


def enroll(url: str, clip: Path, name: str, wait: bool) -> dict[str, Any]:
    files = [("audio", clip.name, clip.read_bytes())]
    form = [*FORM, ("name", name), ("wait", "true" if wait else "false")]
    started = time.perf_counter()
    voice = call_json(url, "POST", "/v1/voices", form=form, files=files)
    answered = time.perf_counter() - started
    row: dict[str, Any] = {"clip": clip.name, "wait": wait, "answer_s": answered}
    job = voice.get("report_job")
    if job is not None:
        while job["state"] not in ("succeeded", "failed", "cancelled"):
            time.sleep(0.02)
            job = call_json(url, "GET", f"/v1/jobs/{job['id']}")
        row["report_s"] = time.perf_counter() - started
        row["report_state"] = job["state"]
        voice = call_json(url, "GET", f"/v1/voices/{voice['id']}")
    quality = voice["quality"]
    row.update(
        version=voice["version"],
        enroll_s=quality.get("enroll_s"),
        instant_clone_s=quality.get("instant_clone_s"),
        renders=(quality.get("pitch_calibration") or {}).get("renders"),
        similarity=quality.get("similarity"),
    )
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    def stats(values: list[float]) -> dict[str, float]:
        return {"median_s": statistics.median(values), "max_s": max(values), "n": len(values)}

    quick = [r for r in rows if not r["wait"]]
    full = [r for r in rows if r["wait"]]
    return {
        "speakable (wait=false)": stats([r["answer_s"] for r in quick]),
        "report done (wait=false)": stats([r["report_s"] for r in quick]),
        "answer with report (wait=true)": stats([r["answer_s"] for r in full]),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"{result['meta']['clips']} recordings (one per speaker), each enrolled both ways, "
        f"interleaved; warm server, 2 cores, upload included; load average "
        f"{result['meta']['loadavg_before']:.1f} before; {result['meta']['date']}.",
        "",
        "| until | clips | median s | max s | target |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, s in result["summary"].items():
        target = f"≤ {TARGET_S}" if label.startswith("speakable") else ""
        lines.append(f"| {label} | {s['n']} | {s['median_s']:.2f} | {s['max_s']:.2f} | {target} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {
        "speakable\n(wait=false)": [r["answer_s"] for r in rows if not r["wait"]],
        "report done\n(wait=false)": [r["report_s"] for r in rows if not r["wait"]],
        "answer\n(wait=true)": [r["answer_s"] for r in rows if r["wait"]],
    }
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.boxplot(list(series.values()), tick_labels=list(series))
    ax.axhline(TARGET_S, color="tab:red", linestyle="--", linewidth=1, label="1.5 s target")
    ax.set_ylabel("seconds from upload")
    ax.set_title("Enrollment through a warm server (2 cores)")
    ax.legend(loc="upper left")
    save_figure(fig, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=10)
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    chosen = clips(args.evaldata, args.clips)
    loadavg = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    with throwaway_server("voxclone-clone-latency-", RATE_LIMIT_OFF, launcher=SERVE) as server:
        _cloning_ready(server.url)
        for index, clip in enumerate(chosen):
            for wait in (False, True):
                row = enroll(server.url, clip, f"bench-{index}-{'w' if wait else 'q'}", wait)
                rows.append(row)
                print(json.dumps(row), flush=True)
    command = "python bench/clone_latency.py" + (
        f" --clips {args.clips}" if args.clips != 10 else ""
    )
    result = {
        "command": command,
        "meta": {
            "clips": len(chosen),
            "loadavg_before": loadavg,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        },
        "rows": rows,
        "summary": summarize(rows),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(markdown(result))
    plot(rows, PLOT)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
