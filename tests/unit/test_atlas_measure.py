"""The atlas measured for a style engine that ships only packs
(synth/voice/atlas_measure.py): every pack first, labelled, then seeded random
blends, each heard through the given render and embedding; kept on disk and
read back on the next start; compared with the engine's one-pack built-ins."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxclone.errors import ModelAssetError
from voxclone.synth.engine.base import ComparisonVoice, EngineVoice, builtin_comparison
from voxclone.synth.voice.atlas import VoiceAtlas
from voxclone.synth.voice.atlas_measure import (
    atlas_key,
    cached_atlas,
    measure_atlas,
    random_voices,
)

RATE = 8_000
ROWS, DIMS = 4, 12


def _packs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {f"p{i}": rng.normal(0, 1, (ROWS, 1, DIMS)).astype(np.float32) for i in range(3)}


def _render(pack: np.ndarray) -> list[np.ndarray]:
    """A tone whose pitch is the prosody half's mean: 100-300 Hz."""
    hz = 200.0 + 100.0 * np.tanh(float(pack.reshape(-1, DIMS)[0, DIMS // 2 :].mean()))
    t = np.arange(RATE) / RATE
    return [(0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)] * 2


def _embed(clips: list[np.ndarray]) -> np.ndarray:
    # Stand-in for the speaker encoder: the clip's spectrum at a few bins.
    spectrum = np.abs(np.fft.rfft(clips[0]))[:256:8]
    return (spectrum / np.linalg.norm(spectrum)).astype(np.float32)


def test_every_pack_then_random_blends_measured_and_labelled() -> None:
    packs = _packs()
    data = measure_atlas(packs, _render, RATE, _embed)
    n = len(packs) + random_voices(len(packs))
    assert data["embeddings"].shape == (n, 32) and data["f0_median"].shape == (n,)
    assert [str(x) for x in data["labels"][:3]] == ["p0", "p1", "p2"]
    assert not any(str(x) for x in data["labels"][3:])
    assert np.isnan(data["wer"]).all()  # no ASR at start-up: neutral
    # The one-pack rows speak at their pack's pitch (the tone's, within DIO's error).
    for i, name in enumerate(sorted(packs)):
        want = 200.0 + 100.0 * np.tanh(float(packs[name].reshape(-1, DIMS)[0, DIMS // 2 :].mean()))
        assert data["f0_median"][i] == pytest.approx(want, rel=0.03)
    atlas = VoiceAtlas.from_arrays(
        data, packs, comparison={"p1": ComparisonVoice("voice one", "M", "en-us")}
    )
    # A one-pack row rebuilds that pack exactly (12 dims: halves of 6).
    np.testing.assert_allclose(atlas.basis.pack(atlas.recipe(1)), packs["p1"], atol=1e-6)
    assert [(v.index, v.name, v.sex) for v in atlas.stock.voices] == [(1, "voice one", "M")]


def test_one_pack_is_not_a_space_to_search() -> None:
    with pytest.raises(ModelAssetError):
        measure_atlas({"p0": _packs()["p0"]}, _render, RATE, _embed)


def test_kept_on_disk_and_read_back(tmp_path: Path) -> None:
    packs = _packs()
    calls = []

    def measure() -> dict[str, np.ndarray]:
        calls.append(1)
        return measure_atlas(packs, _render, RATE, _embed, n_random=2)

    key = atlas_key("hum/x@1", packs, ("One sentence.",))
    first = cached_atlas(tmp_path, key, measure)
    again = cached_atlas(tmp_path, key, measure)
    assert len(calls) == 1
    np.testing.assert_array_equal(first["embeddings"], again["embeddings"])
    # Other packs (or sentences, or weights) are another atlas.
    other = {**packs, "p0": packs["p0"] + 1.0}
    assert atlas_key("hum/x@1", other, ("One sentence.",)) != key
    assert atlas_key("hum/x@1", packs, ("Another.",)) != key
    # A damaged file is measured again, not a failed start.
    (tmp_path / f"atlas-{key}.npz").write_bytes(b"not an npz")
    cached_atlas(tmp_path, key, measure)
    assert len(calls) == 2


def test_the_built_ins_made_of_one_pack_are_the_comparison_voices() -> None:
    packs = _packs()
    voices = {
        "low": EngineVoice("low", "a low voice", style=packs["p2"].copy(), sex="M"),
        "mix": EngineVoice("mix", "a blend", style=(packs["p0"] + packs["p1"]) / 2, sex="F"),
        "prompted": EngineVoice("prompted", "a prompt voice", prompt=object()),
    }
    assert builtin_comparison(voices, packs) == {"p2": ComparisonVoice("low", "M", None)}
