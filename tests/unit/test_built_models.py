"""Model files built or assembled at the first start (issue 45): written 0600
whatever the umask, their hash recorded when built and checked when loaded; a
tampered copy is discarded and rebuilt with a log line, never loaded."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import onnxruntime as ort
import pytest

from voxclone.synth import built_models
from voxclone.synth.engine.kokoro import ort_cache
from voxclone.synth.engine.kokoro.assets import MODEL_FILENAME, assemble_model
from voxclone.synth.voice import campplus_onnx

SOURCE = b"source graph " * 1000


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The umask of a shell outside the server (secure_home sets 077 there)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


class FakeOrt:
    """Stands in for ONNX Runtime: "optimizes" by prefixing the graph, and
    records the bytes of every graph it was handed."""

    def __init__(self) -> None:
        self.loaded: list[bytes] = []

    def __call__(self, model: str | bytes, opts: ort.SessionOptions) -> object:
        data = Path(model).read_bytes() if isinstance(model, str) else model
        self.loaded.append(data)
        if opts.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL:
            # Written the way ORT writes it: plain open(), the umask's mode.
            Path(opts.optimized_model_filepath).write_bytes(b"optimized " + data)
        return object()


def _open(cache: ort_cache.OptimizedModelCache, fake: FakeOrt) -> None:
    cache.open(ort.SessionOptions(), fake)


@pytest.mark.usefixtures("loose_umask")
def test_tampered_optimized_graph_is_discarded_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = tmp_path / "model.onnx"
    source.write_bytes(SOURCE)
    cache = ort_cache.OptimizedModelCache(tmp_path, source, "k" * 20)
    fake = FakeOrt()
    _open(cache, fake)
    assert cache.built and cache.path.read_bytes() == b"optimized " + SOURCE
    # Old code: 0644 (ORT's open() under the umask).
    assert _mode(cache.path) == 0o600
    assert _mode(built_models.record_path(cache.path)) == 0o600

    _open(cache, fake)  # the intact copy is loaded, not rebuilt
    assert not cache.built and fake.loaded[-1] == b"optimized " + SOURCE

    tampered = b"a graph someone else wrote"
    cache.path.write_bytes(tampered)
    caplog.set_level(logging.WARNING, logger="voxclone.synth.built_models")
    _open(cache, fake)
    # Old code handed the tampered file to ONNX Runtime and served it.
    assert tampered not in fake.loaded
    assert cache.built and cache.path.read_bytes() == b"optimized " + SOURCE
    assert any("optimized Kokoro graph failed its hash check" in r.message for r in caplog.records)


def test_optimized_graph_without_a_record_is_rebuilt(tmp_path: Path) -> None:
    """A copy left by a version that recorded no hash is not trusted."""
    source = tmp_path / "model.onnx"
    source.write_bytes(SOURCE)
    cache = ort_cache.OptimizedModelCache(tmp_path, source, "k" * 20)
    cache.path.parent.mkdir(parents=True)
    cache.path.write_bytes(b"unrecorded")
    fake = FakeOrt()
    _open(cache, fake)
    assert b"unrecorded" not in fake.loaded and cache.built


@pytest.mark.usefixtures("loose_umask")
def test_tampered_campplus_graph_is_rebuilt_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_child(*args: object, **kwargs: object) -> None:
        raise OSError("no child process in this test")

    graph = b"the CAM++ graph built from the pinned weights"
    monkeypatch.setattr(built_models.subprocess, "run", no_child)
    monkeypatch.setattr(campplus_onnx, "read_state_dict", lambda path: {})
    monkeypatch.setattr(campplus_onnx, "build_onnx", lambda state: graph)
    weights = tmp_path / "weights.pt"
    assert campplus_onnx.onnx_model(weights, tmp_path) == graph
    saved = campplus_onnx.saved_graph(tmp_path)
    assert _mode(saved) == 0o600  # old code: 0644

    saved.write_bytes(b"tampered")
    caplog.set_level(logging.WARNING, logger="voxclone.synth.built_models")
    assert campplus_onnx.onnx_model(weights, tmp_path) == graph  # old code: b"tampered"
    assert saved.read_bytes() == graph
    assert any("CAM++ graph failed its hash check" in r.message for r in caplog.records)


@pytest.mark.usefixtures("loose_umask")
def test_assembled_model_and_its_marker_are_private(tmp_path: Path) -> None:
    parts = [bytes([i]) * 1000 for i in range(1, 5)]
    digest = hashlib.sha256(b"".join(parts)).hexdigest()
    path = assemble_model(tmp_path, parts=parts, sha256=digest)
    assert path.name == MODEL_FILENAME
    assert _mode(path) == 0o600  # old code: 0644 under this umask
    assert _mode(path.with_suffix(".sha256")) == 0o600
