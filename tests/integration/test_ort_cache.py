"""Kokoro's ONNX Runtime optimized-graph cache: saved once, loaded after,
rebuilt when its key (ORT version, CPU, providers, model) changes, and the
speech it makes is bit-identical to a session that optimizes in memory.
Marked ``models``: loads the real Kokoro graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from installed_models import INSTALLED_MODELS
from voxclone.synth.engine import registry
from voxclone.synth.engine.base import Engine, EngineConfig, SynthItem
from voxclone.synth.engine.kokoro import ort_cache
from voxclone.synth.engine.kokoro.assets import MODEL_FILENAME, assemble_model
from voxclone.synth.engine.kokoro.engine import KokoroEngine

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def assets() -> Path:
    """The assembled model, linked into each test's own models directory."""
    return assemble_model(INSTALLED_MODELS, verify_existing=False)


def _speak(engine: Engine) -> np.ndarray:
    tokenizer = engine.tokenizer()
    tokens = tokenizer.token_ids(tokenizer.phonemize("Hello world.", "en-us"))
    style = engine.builtin_voices()["clear_female"].style
    return engine.synthesize([SynthItem(tokens, style, 1.0)])[0]


def _engine(home: Path, model: Path, *, cached: bool = True) -> Engine:
    if not home.exists():
        home.mkdir(parents=True)
        (home / MODEL_FILENAME).symlink_to(model)
        marker = model.with_suffix(".sha256")
        (home / marker.name).write_text(marker.read_text())
    options = {"optimized_cache": "true" if cached else "false"}
    engine = registry.create("kokoro", EngineConfig(home, options=options))
    engine.load()
    return engine


def _graph(engine: Engine) -> Path | None:
    graph: Path | None = getattr(engine, "optimized_graph", None)
    return graph


def test_saved_once_then_loaded_with_bit_identical_speech(tmp_path: Path, assets: Path) -> None:
    plain = _engine(tmp_path / "plain", assets, cached=False)
    assert _graph(plain) is None
    reference = _speak(plain)

    first = _engine(tmp_path / "home", assets)
    graph = _graph(first)
    assert graph is not None and graph.exists()
    saved = graph.stat()
    built_speech = _speak(first)

    second = _engine(tmp_path / "home", assets)
    assert _graph(second) == graph
    again = graph.stat()
    assert (again.st_ino, again.st_mtime_ns) == (saved.st_ino, saved.st_mtime_ns)  # not rebuilt
    loaded_speech = _speak(second)

    assert np.array_equal(reference, built_speech)
    assert np.array_equal(reference, loaded_speech)


def test_changed_key_rebuilds_and_drops_the_stale_copy(
    tmp_path: Path, assets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    old = _graph(_engine(home, assets))
    assert old is not None and old.exists()

    monkeypatch.setattr(ort_cache, "cpu_identity", lambda: "another CPU")
    moved = _graph(_engine(home, assets))
    assert moved is not None and moved != old
    assert moved.exists() and not old.exists()

    monkeypatch.setattr(ort_cache.ort, "__version__", "0.0.0-other")
    upgraded = _graph(_engine(home, assets))
    assert upgraded is not None and upgraded not in (old, moved)
    assert [p.name for p in (home / ort_cache.CACHE_DIRNAME).glob("*.onnx")] == [upgraded.name]


def test_unreadable_copy_is_rebuilt(tmp_path: Path, assets: Path) -> None:
    home = tmp_path / "home"
    path = _graph(_engine(home, assets))
    assert path is not None
    path.write_bytes(b"not an onnx graph")
    engine = _engine(home, assets)
    assert _graph(engine) == path and path.stat().st_size > 1_000_000
    assert _speak(engine).size > 0


def _config_entry(options: object, key: str) -> str | None:
    """A session option's value; None when unset (ONNX Runtime raises then)."""
    try:
        return str(options.get_session_config_entry(key))  # type: ignore[attr-defined]
    except RuntimeError:
        return None


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


@pytest.mark.parametrize("head_piece", [True, False], ids=["split-graph", "whole-graph"])
def test_fast_lane_session_opens_when_getting_ready_to_serve_not_on_load(
    tmp_path: Path, assets: Path, head_piece: bool
) -> None:
    # A one-shot `say` only loads; the second session cost it ~0.3 s (issue #20).
    home = tmp_path / "home"
    home.mkdir()
    (home / MODEL_FILENAME).symlink_to(assets)
    marker = assets.with_suffix(".sha256")
    (home / marker.name).write_text(marker.read_text())
    options = {"head_piece": "true" if head_piece else "false"}
    engine = registry.create(
        "kokoro", EngineConfig(home, threads=1, fast_lane_threads=2, options=options)
    )
    assert isinstance(engine, KokoroEngine)  # its fast-lane session is what is checked
    engine.load()
    assert engine.capabilities.fast_lane
    assert engine.capabilities.head_piece is head_piece
    assert engine._fast_session is None and engine._fast_split is None
    tokenizer = engine.tokenizer()
    tokens = tokenizer.token_ids(tokenizer.phonemize("Hello world.", "en-us"))
    style = engine.builtin_voices()["clear_female"].style
    # Without the fast lane an exclusive call still speaks, on the worker session.
    alone = engine.synthesize([SynthItem(tokens, style, 1.0)], exclusive=True)[0]
    engine.warmup()
    if head_piece:
        # The split graph replaces the whole one on the lane (same weights).
        assert engine._fast_session is None and engine._fast_split is not None
        lane = list(engine._fast_split.sessions)
        saved = sorted(p.name for p in (home / ort_cache.CACHE_DIRNAME).glob("*.opt.onnx"))
        # Each part has its own saved copy beside the whole graph's (the worker's).
        assert len(saved) == 3
        assert sum(n.startswith("kokoro-front-") for n in saved) == 1
        assert sum(n.startswith("kokoro-generator-") for n in saved) == 1
    else:
        assert engine._fast_split is None and engine._fast_session is not None
        lane = [engine._fast_session]
    for session in lane:
        # Its threads spin while a call runs (nothing else runs then) and stop
        # when it returns: idle spinning would take the cores the workers need.
        session_options = session.get_session_options()
        assert session_options.intra_op_num_threads == 2
        assert _config_entry(session_options, "session.intra_op.allow_spinning") in (None, "1")
        assert _config_entry(session_options, "session.force_spinning_stop") == "1"
    fast = engine.synthesize([SynthItem(tokens, style, 1.0)], exclusive=True)[0]
    assert alone.size == fast.size and np.allclose(alone, fast, atol=1e-3)


@pytest.mark.parametrize("cached", [True, False], ids=["building-the-cache", "no-cache"])
def test_a_changed_source_model_is_reassembled_before_it_is_read(
    tmp_path: Path, assets: Path, cached: bool
) -> None:
    """Issue 45: the assembled Kokoro model was trusted by its marker on every
    later start, so a file changed under an intact marker was optimized (or,
    without the cache, loaded) as it was. Reading the source now hashes it
    against the pinned SHA-256 and reassembles it from the wheels first."""
    from voxclone.synth.engine.kokoro.assets import expected_sha256
    from voxclone.synth.files import sha256_file

    home = tmp_path / "home"
    home.mkdir()
    data = bytearray(assets.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one weight byte: still a loadable graph
    (home / MODEL_FILENAME).write_bytes(bytes(data))
    marker = assets.with_suffix(".sha256")
    (home / marker.name).write_text(marker.read_text())  # the marker still vouches for it
    engine = _engine(home, assets, cached=cached)
    assert sha256_file(home / MODEL_FILENAME) == expected_sha256()
    assert _speak(engine).size > 0
