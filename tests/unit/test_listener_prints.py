"""The reference as the deep refine's other listeners hear it (CAM++) stays
with the voice through every way a voice is made or changed.

Found in session 25: an enrollment without waiting stored CAM++'s view in its
draft, and the report job then wrote a quality without it, so a deep refine of
such a voice descended by GE2E alone; a recording added later dropped it too.
The service, its stores and the report queue are real (report_fakes.py); the
listener is a stand-in that hears each clip as a vector of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import report_fakes
from report_fakes import enroll_request, until

from voxclone.service.voices import report_queue
from voxclone.service.voices.service import VoiceService
from voxclone.service.voices.stored import LISTENER_PRINTS_KEY, pooled_listener_prints


class StandInListener:
    """``reference_embeddings`` as DeepVoiceRefiner has it; call k hears (k, 1)."""

    def __init__(self) -> None:
        self.calls = 0

    def reference_embeddings(self, clips16: Sequence[np.ndarray]) -> dict[str, list[float]]:
        self.calls += 1
        vector = np.array([float(self.calls), 1.0])
        return {"campplus": [float(x) for x in vector / np.linalg.norm(vector)]}


@pytest.fixture()
def made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[VoiceService, Any]]:
    monkeypatch.setattr(report_queue, "POLL_S", 0.2)
    listener = StandInListener()
    svc = report_fakes.service(tmp_path / "voices.sqlite3", deep_refiner=listener)
    yield svc, listener
    svc.close()
    svc._jobs.close()  # type: ignore[attr-defined]
    svc._store.close()  # type: ignore[attr-defined]


def _heard(quality: dict[str, Any]) -> np.ndarray:
    return np.asarray(quality[LISTENER_PRINTS_KEY]["campplus"])


def test_an_enrollment_without_waiting_keeps_the_listeners_view_after_its_report(
    made: tuple[VoiceService, StandInListener],
) -> None:
    svc, listener = made
    enrolled = svc.start_enrollment(enroll_request(), wait=False)
    # Measured by the report job, not in the answer (the time to speakable).
    assert listener.calls == 0
    record = until(lambda: (r := svc.get(enrolled.record.id, "owner-a")).version == 2 and r)
    assert listener.calls == 1
    assert _heard(record.quality) == pytest.approx(np.array([1.0, 1.0]) / np.sqrt(2))


def test_a_waited_enrollment_and_an_added_recording_keep_it_pooled(
    made: tuple[VoiceService, StandInListener],
) -> None:
    svc, _listener = made
    record, _ = svc.enroll(enroll_request())
    first = _heard(record.quality)
    added = svc.add_recordings(record.id, "owner-a", [b"RIFF-more"])
    pooled = _heard(added.quality)
    second = np.array([2.0, 1.0]) / np.sqrt(5)
    # Both recordings are 3 s of speech: equal weights, re-normalized.
    expected = (first + second) / np.linalg.norm(first + second)
    assert pooled == pytest.approx(expected, abs=1e-5)


def test_pooling_weights_by_speech_seconds_and_keeps_a_one_sided_listener() -> None:
    old = {LISTENER_PRINTS_KEY: {"campplus": [1.0, 0.0], "other": [0.0, 1.0]}}
    new = {LISTENER_PRINTS_KEY: {"campplus": [0.0, 1.0]}}
    pooled = pooled_listener_prints(old, 9.0, new, 3.0)
    assert np.asarray(pooled["campplus"]) == pytest.approx(np.array([3.0, 1.0]) / np.sqrt(10))
    assert pooled["other"] == [0.0, 1.0]
    # A record too old to pool with (no speech seconds): the new view alone.
    assert pooled_listener_prints(old, 0.0, new, 3.0)["campplus"] == [0.0, 1.0]
