"""A piece fed frame by frame (an engine that streams frames) joins to exactly the
same audio as the piece fed whole, and audio leaves before the piece ends."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from voxclone.synth.audio.join import PieceJoiner

SR = 24_000
FRAME = 1_920  # 80 ms: Pocket TTS's frame


def _piece(rng: np.random.Generator, lead_s: float, tone_s: float, gap_s: float, trail_s: float):
    def tone(seconds: float) -> np.ndarray:
        t = np.arange(int(seconds * SR)) / SR
        return (0.4 * np.sin(2 * np.pi * rng.uniform(100, 300) * t)).astype(np.float32)

    silence = lambda s: np.zeros(int(s * SR), np.float32)  # noqa: E731
    return np.concatenate(
        [silence(lead_s), tone(tone_s), silence(gap_s), tone(tone_s / 2), silence(trail_s)]
    )


def _whole(pieces: list[tuple[np.ndarray, float]]) -> np.ndarray:
    joiner = PieceJoiner(SR)
    out = [joiner.feed(p, pause) for p, pause in pieces]
    return np.concatenate([*out, joiner.finish()])


def _in_frames(pieces: list[tuple[np.ndarray, float]], frame: int) -> tuple[np.ndarray, list[int]]:
    joiner = PieceJoiner(SR)
    out: list[np.ndarray] = []
    sent_before_end: list[int] = []
    for piece, pause in pieces:
        cuts = list(range(frame, len(piece), frame))
        parts = np.split(piece, cuts) if cuts else [piece]
        early = 0
        for part in parts[:-1]:
            got = joiner.feed_partial(part)
            early += got.size
            out.append(got)
        sent_before_end.append(early)
        out.append(joiner.feed(parts[-1], pause))
    out.append(joiner.finish())
    return np.concatenate(out), sent_before_end


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    pauses=st.lists(st.sampled_from([0.0, 0.005, 0.02, 0.3]), min_size=1, max_size=3),
    lead=st.floats(0.0, 0.3),
    trail=st.floats(0.0, 0.3),
    frame=st.sampled_from([317, 480, FRAME]),
)
def test_partial_feeding_is_identical_to_whole(seed, pauses, lead, trail, frame):
    rng = np.random.default_rng(seed)
    pieces = [(_piece(rng, lead, rng.uniform(0.05, 0.6), 0.1, trail), p) for p in pauses]
    whole = _whole(pieces)
    streamed, _ = _in_frames(pieces, frame)
    assert streamed.shape == whole.shape
    np.testing.assert_array_equal(streamed, whole)


def test_audio_leaves_before_the_piece_ends():
    rng = np.random.default_rng(1)
    piece = _piece(rng, 0.1, 1.5, 0.1, 0.4)
    _, early = _in_frames([(piece, 0.3)], FRAME)
    # All but the held-back trailing silence (and 10 ms) is sent frame by frame.
    assert early[0] >= int(1.5 * 1.5 * SR) - FRAME


def test_silent_partials_then_silent_end():
    joiner = PieceJoiner(SR)
    assert joiner.feed_partial(np.zeros(FRAME, np.float32)).size == 0
    out = joiner.feed(np.zeros(FRAME, np.float32), 0.2)
    assert not np.any(out)
