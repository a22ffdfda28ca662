"""The watermark's ONNX graphs built in a child, saved, hash-recorded, rebuilt when
tampered (with the helpers of test_watermark.py, which checks the network itself).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_watermark import (  # tests/unit (conftest.py)
    _speech,
)

from voxclone.synth.audio import watermark


def test_graphs_are_saved_hash_recorded_and_rebuilt_when_tampered(tmp_path: Path) -> None:
    first = watermark.PerthMark.load(tmp_path)  # built by a child, saved 0600
    saved = sorted((tmp_path / "watermark").glob("*.onnx"))
    assert [p.name.split("-")[2] for p in saved] == ["decoder", "encoder"]
    for path in saved:
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.with_name(path.name + ".sha256").is_file()
    clean = _speech(rate=24_000)[: 24_000 * 2]
    expected = first.embed(clean, 24_000)
    # A changed file is discarded and built again, never loaded.
    encoder = next(p for p in saved if "-encoder-" in p.name)
    encoder.write_bytes(encoder.read_bytes()[:-64] + bytes(64))
    again = watermark.PerthMark.load(tmp_path)
    np.testing.assert_array_equal(again.embed(clean, 24_000), expected)
