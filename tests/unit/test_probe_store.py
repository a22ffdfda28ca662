"""The built-ins' probe renders kept on disk (synth/voice/probe_store.py): a
later process reads them instead of rendering, nothing stale or broken is read."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from voxclone.synth.voice.probe_store import StockProbeStore
from voxclone.synth.voice.stock_check import StockCheck

IDENTITY = "kokoro/kokoro-82m@abc|24000|(1, 2, 3)"


def _pack(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((510, 1, 256)).astype(np.float32)


def _audio(seed: int) -> np.ndarray:
    return np.random.default_rng(100 + seed).uniform(-0.5, 0.5, 24_000).astype(np.float32)


def test_a_render_comes_back_for_its_pack_and_probe_only(tmp_path: Path) -> None:
    store = StockProbeStore(tmp_path / "probes", IDENTITY)
    assert store.get(_pack(0)) is None
    store.put(_pack(0), _audio(0))

    again = StockProbeStore(tmp_path / "probes", IDENTITY).get(_pack(0))
    assert again is not None and again.dtype == np.float32
    np.testing.assert_array_equal(again, _audio(0))
    assert store.get(_pack(1)) is None  # another voice
    # Another model, sentence or rate is another probe: nothing read.
    assert StockProbeStore(tmp_path / "probes", IDENTITY + "x").get(_pack(0)) is None


def test_a_damaged_file_is_a_miss_and_is_written_again(tmp_path: Path) -> None:
    store = StockProbeStore(tmp_path, IDENTITY)
    store.put(_pack(0), _audio(0))
    (path,) = tmp_path.glob("*.npy")
    path.write_bytes(path.read_bytes()[:100])  # cut short
    assert store.get(_pack(0)) is None
    np.save(path, np.array([np.nan, 1.0], np.float32))  # loads, but is no audio
    assert store.get(_pack(0)) is None
    np.save(path, np.ones((2, 2), np.float64))
    assert store.get(_pack(0)) is None
    store.put(_pack(0), _audio(0))
    np.testing.assert_array_equal(store.get(_pack(0)), _audio(0))


def test_a_folder_that_cannot_be_written_keeps_nothing_and_raises_nothing(
    tmp_path: Path,
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    store = StockProbeStore(blocked / "probes", IDENTITY)
    store.put(_pack(0), _audio(0))
    assert store.get(_pack(0)) is None


def _fake_atlas(voices: int) -> Any:
    """What StockCheck's probes read of an atlas: the built-ins and their packs."""
    return SimpleNamespace(
        stock=SimpleNamespace(voices=[SimpleNamespace(index=i) for i in range(voices)]),
        recipe=lambda index: index,
        basis=SimpleNamespace(pack=_pack),
    )


def test_a_second_process_reads_the_builtins_probes_instead_of_rendering(
    tmp_path: Path,
) -> None:
    rendered: list[int] = []

    def probe(pack: np.ndarray) -> np.ndarray:
        seed = next(i for i in range(3) if np.array_equal(pack, _pack(i)))
        rendered.append(seed)
        return _audio(seed)

    def check() -> StockCheck:
        return StockCheck(
            _fake_atlas(3),
            probe=probe,
            tone_for=lambda spectrum, audio: None,
            hear=lambda voice_print, audio, tone: 0.0,
            stored=StockProbeStore(tmp_path, IDENTITY),
        )

    check().warm_probes()
    assert rendered == [0, 1, 2]
    later = check()  # a new process: nothing in memory
    later.warm_probes()
    assert rendered == [0, 1, 2]  # all three read from disk
    np.testing.assert_array_equal(later._stock_probe(1), _audio(1))
