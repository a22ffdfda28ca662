"""Concurrent first starts (child processes) yield one valid model (with the
helpers of test_model_assets.py).
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from test_model_assets import (  # tests/unit (conftest.py)
    GOOD_SHA,
    _assemble_in_child,
)

from voxclone.synth.engine.kokoro.assets import MODEL_FILENAME


def test_concurrent_first_start_yields_one_valid_model(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    queue: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=_assemble_in_child, args=(str(tmp_path), queue)) for _ in range(6)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    results = [queue.get(timeout=5) for _ in procs]
    assert results == [GOOD_SHA] * len(procs)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".onnx")] == [MODEL_FILENAME]
