"""The report job of a ``wait=false`` enrollment tells its first figures while
it still runs (issue 46: the web UI showed "measuring…" for the whole report,
~25 s, though the voice and its similarity are known once the stock check has
run and only Whisper's word error rate is left).

Real service, stores, queue, pipeline and reporter on SQLite; the cloning
models are report_fakes.py's stand-ins, and the transcriber waits for the test
so the report is caught between its first figure and its end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import report_fakes
from report_fakes import ENGINE_RATE, Encoder, enroll_request, until

from voxclone.runtime.job_store import JobRecord
from voxclone.service.voices.service import VoiceService
from voxclone.synth.voice.quality_report import TEST_SENTENCE, QualityReporter


class HeldTranscriber:
    """Whisper's stand-in: answers the test sentence once released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, audio: np.ndarray, rate: int) -> str:
        self.started.set()
        assert self.release.wait(30), "the test never released the transcriber"
        return TEST_SENTENCE


@pytest.fixture()
def held() -> Iterator[HeldTranscriber]:
    transcriber = HeldTranscriber()
    yield transcriber
    transcriber.release.set()  # never leave the report thread waiting


@pytest.fixture()
def svc(tmp_path: Path, held: HeldTranscriber) -> Iterator[VoiceService]:
    def synthesize(tokens: tuple[int, ...], style: Any) -> np.ndarray:
        t = np.arange(ENGINE_RATE) / ENGINE_RATE
        return (0.2 * np.sin(2 * np.pi * 180.0 * t)).astype(np.float32)

    reporter = QualityReporter(
        Encoder(),  # type: ignore[arg-type]
        synthesize,
        (1, 2, 3),
        transcribe=held,
        word_error_rate=lambda reference, heard: 0.0 if reference == heard else 1.0,
        engine_rate=ENGINE_RATE,
    )
    service = report_fakes.service(tmp_path / "voices.sqlite3", quality_reporter=reporter)
    yield service
    held.release.set()
    service.close()
    service._jobs.close()  # type: ignore[attr-defined]
    service._store.close()  # type: ignore[attr-defined]


def test_the_similarity_is_in_the_running_job_before_the_word_error_rate(
    svc: VoiceService, held: HeldTranscriber
) -> None:
    enrolled = svc.start_enrollment(enroll_request(), wait=False)
    assert enrolled.report_job is not None
    job_id = enrolled.report_job.id
    assert held.started.wait(30), "the report never reached its word error rate"

    running: JobRecord = svc.get_job(job_id, "owner-a")
    assert running.state == "running"
    assert running.result is not None, "no figure is told before the report ends"
    assert running.result["partial"] is True
    assert running.result["voice_id"] == enrolled.record.id
    # The stand-in encoder hears every probe as the reference: similarity 1.
    assert running.result["similarity"] == pytest.approx(1.0)
    assert running.result["speaks_as"] is None  # its own clone (no stock check here)
    assert "wer" not in running.result
    # The voice itself is still the draft until the whole report is stored.
    assert svc.get(enrolled.record.id, "owner-a").quality["report_pending"] is True

    held.release.set()
    done = until(lambda: (j := svc.get_job(job_id, "owner-a")).done and j)
    assert done.state == "succeeded"
    assert "partial" not in done.result
    assert done.result["similarity"] == running.result["similarity"]
    assert done.result["wer"] == 0.0
    assert done.result["speaks_as"] is None
