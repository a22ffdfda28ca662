"""Kokoro start-up with and without ONNX Runtime's saved optimized graph.

Three ways to load the engine as the server does (one worker session plus the
fast-lane session), each in a fresh models directory that links the
already-assembled model:
  * ``optimize``: the cache switched off, every session optimizes the source
    graph in memory (the behaviour before the cache);
  * ``first start``: the cache is empty, the first session optimizes and saves
    the graph, the fast-lane session loads the saved copy;
  * ``cached``: the saved copy is there, both sessions load it with
    optimizations off.

    python studies/engine_load.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxclone.config import Settings  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import EngineConfig  # noqa: E402
from voxclone.synth.engine.kokoro.assets import MODEL_FILENAME, assemble_model  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "engine_load.json"
MARKDOWN = RESULTS.with_suffix(".md")
LABELS = {
    "optimize": "no cache (every session optimizes the graph)",
    "first start": "first start (optimize, save the graph)",
    "cached": "later starts (load the saved graph)",
}


def _linked_models_dir(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    os.symlink(source, target / MODEL_FILENAME)
    marker = source.with_suffix(".sha256")
    (target / marker.name).write_text(marker.read_text())
    return target


def _load_seconds(models_dir: Path, settings: Settings, *, cached: bool) -> float:
    config = EngineConfig(
        models_dir,
        threads=settings.onnx_threads,
        fast_lane_threads=settings.fast_lane_threads,
        options={"optimized_cache": "true" if cached else "false"},
    )
    engine = registry.create("kokoro", config)
    engine.load()
    seconds = engine.load_seconds
    assert seconds is not None
    return seconds


def markdown(result: Mapping[str, object]) -> str:
    load = result["load"]
    assert isinstance(load, dict)
    rows = "\n".join(
        f"| {LABELS[name]} | {v['median_s']} | {', '.join(str(x) for x in v['runs_s'])} |"
        for name, v in load.items()
    )
    return (
        "Kokoro engine load (`load_seconds`: the worker session plus the fast-lane session, "
        f"{result['onnx_threads']} and {result['fast_lane_threads']} threads) with ONNX "
        "Runtime's saved optimized graph. Load average during the run: "
        f"{result.get('load_average', 'n/a')} on {result['cpu_count']} cores.\n\n"
        "| start | median s | runs s |\n|---|---:|---|\n" + rows + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    settings = Settings()
    source = assemble_model(settings.models_dir, verify_existing=False)
    runs: dict[str, list[float]] = {"optimize": [], "first start": [], "cached": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            plain = _linked_models_dir(source, Path(tmp) / f"plain{i}")
            runs["optimize"].append(_load_seconds(plain, settings, cached=False))
            home = _linked_models_dir(source, Path(tmp) / f"cache{i}")
            runs["first start"].append(_load_seconds(home, settings, cached=True))
            runs["cached"].append(_load_seconds(home, settings, cached=True))
    summary = {
        name: {"median_s": round(statistics.median(v), 3), "runs_s": [round(x, 3) for x in v]}
        for name, v in runs.items()
    }
    result = {
        "sessions": 1 + (1 if settings.fast_lane_threads > settings.onnx_threads else 0),
        "onnx_threads": settings.onnx_threads,
        "fast_lane_threads": settings.fast_lane_threads,
        "cpu_count": os.cpu_count(),
        "load_average": round(os.getloadavg()[0], 1),
        "command": f"python studies/engine_load.py --repeat {args.repeat}",
        "load": summary,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    MARKDOWN.write_text(markdown(result))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
