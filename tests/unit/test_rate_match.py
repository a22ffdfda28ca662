"""A clone's pace: the reference's rate shrunk to the population's, as a bounded speed."""

from __future__ import annotations

import math

import pytest

from voxclone.service.catalog import ResolvedVoice
from voxclone.synth.voice.rate_match import (
    POPULATION_RATE,
    RATE_WEIGHT,
    SPEED_LIMITS,
    follow_speed,
    target_rate,
)


def test_target_rate_lies_between_the_clip_and_the_population_in_log_terms() -> None:
    fast = 6.5
    target = target_rate(fast)
    assert POPULATION_RATE < target < fast
    share = math.log(target / POPULATION_RATE) / math.log(fast / POPULATION_RATE)
    assert share == pytest.approx(RATE_WEIGHT)
    assert target_rate(POPULATION_RATE) == pytest.approx(POPULATION_RATE)
    assert target_rate(0.0) == POPULATION_RATE  # a silent measurement says nothing


def test_follow_speed_moves_the_clone_towards_the_target_and_stays_bounded() -> None:
    # A clone that already speaks at the target keeps its pace.
    assert follow_speed(5.6, target_rate(5.6)) == pytest.approx(1.0)
    # Slower than its reference's pace: sped up, by the ratio of the rates.
    assert follow_speed(6.0, 5.2) == pytest.approx(target_rate(6.0) / 5.2)
    assert follow_speed(6.0, 5.2) > 1.0 and follow_speed(4.0, 5.6) < 1.0
    # Far off: no more than the limits (an ordinary pace, intelligible).
    assert follow_speed(9.0, 3.0) == SPEED_LIMITS[1]
    assert follow_speed(2.0, 8.0) == SPEED_LIMITS[0]
    # Unknown rates change nothing.
    assert follow_speed(0.0, 5.0) == 1.0 and follow_speed(5.0, 0.0) == 1.0


@pytest.mark.parametrize(
    ("quality", "speed"),
    [
        ({"speaking_rate": {"speed": 0.9}}, 0.9),
        ({}, 1.0),  # voices enrolled before the pace was stored
        ({"speaking_rate": {"speed": "fast"}}, 1.0),
        ({"speaking_rate": {"speed": 40.0}}, 1.0),  # not a sane pace: ignored
        ({"speaking_rate": [1.2]}, 1.0),
    ],
)
def test_a_stored_voice_resolves_with_its_pace(quality: dict[str, object], speed: float) -> None:
    from types import SimpleNamespace

    record = SimpleNamespace(
        id="v1",
        name="a",
        version=1,
        style=None,
        language="en-us",
        tone_db=None,
        engine="kokoro",
        model_id="m",
        quality=quality,
    )
    assert ResolvedVoice.from_record(record).speed == speed  # type: ignore[arg-type]
