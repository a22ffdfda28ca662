"""A stream's first chunk in two pieces (synth/engine/kokoro/head_piece.py):
where it is cut, how the pieces join, and on the real graph that the split
renders the same chunk the whole graph does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from installed_models import INSTALLED_MODELS
from voxclone.synth.engine import registry
from voxclone.synth.engine.base import EngineConfig, SynthItem
from voxclone.synth.engine.kokoro import head_piece
from voxclone.synth.engine.kokoro.assets import MODEL_FILENAME, assemble_model
from voxclone.synth.engine.kokoro.engine import KokoroEngine
from voxclone.synth.engine.kokoro.head_piece import HOP_SAMPLES, FrontOutput


def test_the_cut_leaves_the_head_long_enough_to_cover_the_rest() -> None:
    counts = np.array([4, 3, 5, 6, 2, 7, 5, 6, 4, 4])  # 46 frames, lead of 4
    cut = head_piece.head_frames(counts, int(counts.sum()), lead=4)
    assert cut is not None
    assert cut in np.cumsum(counts)  # on a token boundary
    playable = cut - 4
    rest = counts.sum() - cut + head_piece.CONTEXT_FRAMES
    assert playable * head_piece.LANE_REALTIME_MULTIPLE >= rest
    # The boundary before it would not have been enough.
    earlier = np.cumsum(counts)[list(np.cumsum(counts)).index(cut) - 1]
    assert (earlier - 4) * head_piece.LANE_REALTIME_MULTIPLE < counts.sum() - earlier + 8


def test_a_chunk_too_short_to_cut_is_rendered_whole() -> None:
    counts = np.array([4, 3, 4])
    assert head_piece.head_frames(counts, 11, lead=4) is None


def test_the_option_is_off_unless_asked_and_a_typo_is_refused(tmp_path: Path) -> None:
    from voxclone.synth.engine import kokoro

    assert not kokoro.create(EngineConfig(tmp_path, fast_lane_threads=2))._head_piece
    asked = EngineConfig(tmp_path, fast_lane_threads=2, options={"head_piece": "yes"})
    assert kokoro.create(asked)._head_piece
    with pytest.raises(ValueError, match="head_piece"):
        kokoro.create(EngineConfig(tmp_path, options={"head_piece": "maybe"}))


def _front(frames: int) -> FrontOutput:
    return FrontOutput(
        features=np.zeros((1, 3, 2 * frames), np.float32),
        f0=np.full((1, 2 * frames), 100.0, np.float32),
        frames_per_token=np.array([4, frames - 8, 4]),
    )


def _generator(level_after: float) -> tuple[list[np.ndarray], head_piece.Generate]:
    """A fake generator: a 200-Hz tone whose phase runs on from the offset it
    is given, at level 0.1 on its first call (the head) and ``level_after``
    on later ones; it records each call's offset."""
    offsets: list[np.ndarray] = []
    step = 200.0 * HOP_SAMPLES / 2 / 24_000  # cycles per half-frame column

    def generate(
        features: np.ndarray, f0: np.ndarray, offset: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        level = 0.1 if not offsets else level_after
        offsets.append(offset.copy())
        columns = features.shape[2]
        start = float(offset.ravel()[0])
        phase = start + step * np.arange(1, columns + 1, dtype=np.float64).reshape(1, -1, 1)
        cycles = start + np.arange(columns * HOP_SAMPLES // 2) * 200.0 / 24_000
        audio = (level * np.sin(2 * np.pi * cycles)).astype(np.float32)
        return audio, phase.astype(np.float32)

    return offsets, generate


def test_pieces_add_up_to_the_chunk_and_the_rest_carries_the_phase_on() -> None:
    front = _front(48)
    offsets, generate = _generator(level_after=0.1)
    pieces = list(head_piece.render_pieces(front, generate, cut=20))
    assert len(pieces) == 2
    assert sum(p.size for p in pieces) == 48 * HOP_SAMPLES
    # The head leaves before the crossfade; the rest starts CONTEXT frames before the cut.
    assert pieces[0].size == (20 - head_piece.CROSSFADE_FRAMES // 2) * HOP_SAMPLES
    head_offset, rest_offset = offsets
    assert not head_offset.any()
    start = 20 - head_piece.CONTEXT_FRAMES
    step = 200.0 * HOP_SAMPLES / 2 / 24_000
    expected = (step * (2 * (start + head_piece.SILENT_LEAD_FRAMES))) % 1.0
    assert rest_offset.ravel()[0] == pytest.approx(expected, abs=1e-4)


def test_the_rest_meets_the_head_at_its_level_and_eases_back_to_its_own() -> None:
    front = _front(80)
    _offsets, generate = _generator(level_after=0.4)  # the rest renders 12 dB louder
    head, rest = head_piece.render_pieces(front, generate, cut=30)

    def rms(x: np.ndarray) -> float:
        return float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))

    window = HOP_SAMPLES
    assert rms(rest[:window]) == pytest.approx(0.1 / np.sqrt(2), rel=0.15)  # no step at the seam
    eased = int(head_piece.EASE_S * 24_000) + 2 * window
    assert rms(rest[eased : eased + window]) == pytest.approx(0.4 / np.sqrt(2), rel=0.05)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> KokoroEngine:
    model = assemble_model(INSTALLED_MODELS, verify_existing=False)
    home = tmp_path_factory.mktemp("head-piece")
    (home / MODEL_FILENAME).symlink_to(model)
    marker = model.with_suffix(".sha256")
    (home / marker.name).write_text(marker.read_text())
    options = {"head_piece": "true"}  # off by default
    made = registry.create(
        "kokoro", EngineConfig(home, threads=1, fast_lane_threads=2, options=options)
    )
    assert isinstance(made, KokoroEngine)
    made.warmup()
    return made


def _item(engine: KokoroEngine, text: str) -> SynthItem:
    tokenizer = engine.tokenizer()
    style = engine.builtin_voices()["clear_female"].style
    return SynthItem(tokenizer.token_ids(tokenizer.phonemize(text, "en-us")), style, 1.0)


@pytest.mark.models
def test_the_split_graph_renders_what_the_whole_graph_does(engine: KokoroEngine) -> None:
    assert engine.capabilities.head_piece
    item = _item(engine, "The birch canoe slid.")
    worker = engine.synthesize([item])[0]
    lane = engine.synthesize([item], exclusive=True)[0]  # front + generator, one window
    assert np.array_equal(worker, lane)


@pytest.mark.models
def test_a_first_chunk_leaves_as_a_head_and_the_rest(engine: KokoroEngine) -> None:
    item = _item(engine, "The birch canoe")
    whole = engine.synthesize([item])[0]
    pieces = list(engine.stream(item, exclusive=True))
    assert len(pieces) == 2
    assert sum(p.size for p in pieces) == whole.size
    assert pieces[0].size < 0.6 * whole.size
    joined = np.concatenate(pieces)

    def level_db(x: np.ndarray) -> float:
        return float(10 * np.log10(np.mean(np.square(x, dtype=np.float64)) + 1e-12))

    # The same speech: level within 3 dB, and the envelopes follow each other.
    assert abs(level_db(joined) - level_db(whole)) < 3.0
    frames = whole.size // HOP_SAMPLES
    env = [
        np.sqrt(np.mean(np.square(x[: frames * HOP_SAMPLES].reshape(frames, -1)), axis=1))
        for x in (whole, joined)
    ]
    assert np.corrcoef(env[0], env[1])[0, 1] > 0.9
    # Off the all-cores lane the chunk comes whole.
    assert len(list(engine.stream(item))) == 1
