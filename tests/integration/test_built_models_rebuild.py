"""A tampered speaker-encoder graph is rebuilt: the rebuild runs in a child process (moved
from tests/unit/test_built_models.py, issue 51).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import test_built_models as unit  # tests/unit (conftest.py)
from test_built_models import _mode  # tests/unit (conftest.py)

from voxclone.synth.voice import ge2e

loose_umask = unit.loose_umask  # its fixture, defined once there


@pytest.mark.usefixtures("loose_umask")
def test_tampered_speaker_encoder_graph_is_rebuilt_not_loaded(tmp_path: Path) -> None:
    built = ge2e.onnx_model(tmp_path)  # built by a child process, as at a first start
    saved = ge2e.saved_graph(tmp_path)
    assert saved.read_bytes() == built and _mode(saved) == 0o600
    assert ge2e.onnx_model(tmp_path) == built

    saved.write_bytes(built[:-64] + b"\x00" * 64)  # still parses as ONNX, other weights
    assert ge2e.onnx_model(tmp_path) == built  # old code: the tampered bytes
    assert saved.read_bytes() == built
