"""FirstAudioStages: a stream's time to first audio split into stages (issue #20)."""

from __future__ import annotations

import pytest

from voxclone.runtime.scheduler import WorkTiming
from voxclone.service.speech.service import FirstAudioStages


def test_stages_add_up_to_the_time_to_first_audio() -> None:
    timing = WorkTiming(submitted=10.2, started=10.5, finished=11.3)
    stages = FirstAudioStages.of(10.0, timing, now=11.4)
    assert stages.as_dict() == pytest.approx(
        {"plan": 0.2, "queue": 0.3, "engine": 0.8, "post": 0.1, "encode": 0.0}
    )
    assert sum(stages.as_dict().values()) == pytest.approx(11.4 - 10.0)


def test_a_frame_engine_first_piece_counts_as_engine_time() -> None:
    # Pieces leave before the engine call ends: no 'finished' yet.
    timing = WorkTiming(submitted=1.0, started=1.1, finished=None)
    stages = FirstAudioStages.of(0.9, timing, now=1.6)
    assert stages.engine == pytest.approx(0.5) and stages.post == 0.0
