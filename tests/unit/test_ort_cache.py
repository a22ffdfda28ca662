"""Kokoro's ONNX Runtime optimized-graph cache: saved once, loaded after,
rebuilt when its key (ORT version, CPU, providers, model) changes, and the
speech it makes is bit-identical to a session that optimizes in memory.
Marked ``models``: loads the real Kokoro graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxclone.synth.engine.base import SynthItem
from voxclone.synth.engine.kokoro import ort_cache
from voxclone.synth.engine.kokoro.assets import KokoroAssets, load_assets
from voxclone.synth.engine.kokoro.engine import WARMUP_TOKENS, KokoroEngine

pytestmark = pytest.mark.models

MODELS = Path.home() / ".cache" / "voxclone" / "models"


@pytest.fixture(scope="module")
def assets() -> KokoroAssets:
    return load_assets(MODELS)


def _speak(engine: KokoroEngine, assets: KokoroAssets) -> np.ndarray:
    pack = next(iter(assets.packs.values()))
    return engine.synthesize([SynthItem(WARMUP_TOKENS, pack, 1.0)])[0]


def _engine(home: Path, assets: KokoroAssets, *, cached: bool = True) -> KokoroEngine:
    engine = KokoroEngine(home, assets=assets, optimized_cache=cached)
    engine.load()
    return engine


def test_saved_once_then_loaded_with_bit_identical_speech(
    tmp_path: Path, assets: KokoroAssets
) -> None:
    reference = _speak(_engine(tmp_path / "plain", assets, cached=False), assets)

    first = _engine(tmp_path / "home", assets)
    assert first.optimized_graph is not None and first.optimized_graph.exists()
    saved = first.optimized_graph.stat()
    built_speech = _speak(first, assets)

    second = _engine(tmp_path / "home", assets)
    assert second.optimized_graph == first.optimized_graph
    again = second.optimized_graph.stat()
    assert (again.st_ino, again.st_mtime_ns) == (saved.st_ino, saved.st_mtime_ns)  # not rebuilt
    loaded_speech = _speak(second, assets)

    assert np.array_equal(reference, built_speech)
    assert np.array_equal(reference, loaded_speech)


def test_changed_key_rebuilds_and_drops_the_stale_copy(
    tmp_path: Path, assets: KokoroAssets, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    old = _engine(home, assets).optimized_graph
    assert old is not None and old.exists()

    monkeypatch.setattr(ort_cache, "cpu_identity", lambda: "another CPU")
    moved = _engine(home, assets)
    assert moved.optimized_graph is not None and moved.optimized_graph != old
    assert moved.optimized_graph.exists() and not old.exists()

    monkeypatch.setattr(ort_cache.ort, "__version__", "0.0.0-other")
    upgraded = _engine(home, assets).optimized_graph
    assert upgraded not in (None, old, moved.optimized_graph)
    assert [p.name for p in (home / ort_cache.CACHE_DIRNAME).glob("*.onnx")] == [upgraded.name]


def test_unreadable_copy_is_rebuilt(tmp_path: Path, assets: KokoroAssets) -> None:
    home = tmp_path / "home"
    path = _engine(home, assets).optimized_graph
    assert path is not None
    path.write_bytes(b"not an onnx graph")
    engine = _engine(home, assets)
    assert engine.optimized_graph == path and path.stat().st_size > 1_000_000
    assert _speak(engine, assets).size > 0


def test_key_covers_ort_version_cpu_providers_and_model() -> None:
    base = ort_cache.cache_key("a" * 64, ["CPUExecutionProvider"], cpu="x", ort_version="1")
    assert base == ort_cache.cache_key("a" * 64, ["CPUExecutionProvider"], cpu="x", ort_version="1")
    variants = {
        ort_cache.cache_key("b" * 64, ["CPUExecutionProvider"], cpu="x", ort_version="1"),
        ort_cache.cache_key("a" * 64, ["CUDAExecutionProvider"], cpu="x", ort_version="1"),
        ort_cache.cache_key("a" * 64, ["CPUExecutionProvider"], cpu="y", ort_version="1"),
        ort_cache.cache_key("a" * 64, ["CPUExecutionProvider"], cpu="x", ort_version="2"),
    }
    assert base not in variants and len(variants) == 4
