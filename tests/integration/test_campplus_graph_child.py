"""CAM++'s ONNX graph built once in a child process and saved (with the helpers
of test_campplus.py, which checks the network itself).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_campplus import (  # tests/unit (conftest.py)
    _speech_like,
    random_state,
)

from voxclone.synth.voice import campplus_onnx
from voxclone.synth.voice.campplus import CamPlusPlus


def test_the_graph_is_built_once_in_a_child_and_saved(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    weights = tmp_path / "w.pt"
    torch.save({k: torch.from_numpy(v) for k, v in random_state(1).items()}, weights)
    data = campplus_onnx.onnx_model(weights, tmp_path)
    assert campplus_onnx.saved_graph(tmp_path).read_bytes() == data
    x = _speech_like(1.5, seed=4)
    np.testing.assert_allclose(
        campplus_onnx.CampplusSession(data).embed(x),
        CamPlusPlus(random_state(1)).embed(x),
        rtol=0,
        atol=1e-3,
    )
