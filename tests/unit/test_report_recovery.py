"""A ``wait=false`` enrollment whose process dies mid-report is measured by the
next process (issue 37: its report job was failed at restart and the voice
stayed ``report_pending`` forever).

The crash is real: a child process enrolls on a SQLite file, hangs inside its
report (the atlas never answers) and is killed with SIGKILL. A new service on
the same file then finishes the report: after the dead worker's lease expires,
or, when no job is left to claim, from its start-up look for stranded voices.
The cloning models are stand-ins (report_fakes.py); everything else is real.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import report_fakes
from report_fakes import DRAFT_STYLE, SPOKEN_STYLE, enroll_request, until

from voxclone.errors import NotFound
from voxclone.service.voices import report_queue
from voxclone.service.voices.service import VoiceService

CHILD_LEASE_S = 0.6


@pytest.fixture(autouse=True)
def _fast_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_queue, "LEASE_S", CHILD_LEASE_S)
    monkeypatch.setattr(report_queue, "POLL_S", 0.2)


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return tmp_path / "voices.sqlite3"


@pytest.fixture()
def services() -> Iterator[list[VoiceService]]:
    made: list[VoiceService] = []
    yield made
    for svc in made:
        svc.close()
        svc._jobs.close()  # type: ignore[attr-defined]
        svc._store.close()  # type: ignore[attr-defined]


def _assert_measured(svc: VoiceService, voice_id: str) -> dict[str, Any]:
    record = until(lambda: (r := svc.get(voice_id, "owner-a")).version == 2 and r)
    assert "report_pending" not in record.quality
    assert np.allclose(record.style, SPOKEN_STYLE)  # the draft (0.25) was measured
    # The stand-in reference: the report of the stored print, the recording's
    # stored warnings and SNR kept, similarity measured by the (fake) encoder.
    assert record.quality["similarity"] == pytest.approx(1.0)
    assert record.quality["snr_db"] == pytest.approx(31.5)
    assert "short: 3.0 s of speech" in record.quality["warnings"]
    assert record.quality["report_resumed"] == report_queue.RESUMED_NOTE
    return dict(record.quality)


def test_a_report_that_fails_for_good_settles_the_voice(
    db: Path, services: list[VoiceService]
) -> None:
    svc = report_fakes.service(db, mode="refuse")
    services.append(svc)
    enrolled = svc.start_enrollment(enroll_request(), wait=False)
    assert enrolled.report_job is not None
    job = until(lambda: (j := svc.get_job(enrolled.report_job.id, "owner-a")).done and j)
    assert job.state == "failed" and job.error["field"] == "voice"
    record = until(lambda: (r := svc.get(enrolled.record.id, "owner-a")).version == 2 and r)
    assert "report_pending" not in record.quality  # no longer waiting for nothing
    assert record.quality["report_error"] == "the atlas refuses this voice"
    assert np.allclose(record.style, DRAFT_STYLE)  # the draft stays the voice


def test_the_enrolling_process_measures_its_own_recording(
    db: Path, services: list[VoiceService]
) -> None:
    svc = report_fakes.service(db)
    services.append(svc)
    enrolled = svc.start_enrollment(enroll_request(), wait=False)
    assert enrolled.record.quality["report_pending"] is True
    assert enrolled.report_job is not None and enrolled.report_job.kind == "report"
    job = until(lambda: (j := svc.get_job(enrolled.report_job.id, "owner-a")).done and j)
    assert job.state == "succeeded" and job.attempts == 1
    record = svc.get(enrolled.record.id, "owner-a")
    assert record.version == 2 and "report_resumed" not in record.quality


def test_a_voice_deleted_mid_report_leaves_no_report_job(
    db: Path, services: list[VoiceService]
) -> None:
    svc = report_fakes.service(db, mode="block")
    services.append(svc)
    enrolled = svc.start_enrollment(enroll_request(), wait=False)
    assert enrolled.report_job is not None
    job_id = enrolled.report_job.id
    until(lambda: svc.get_job(job_id, "owner-a").state == "running")
    svc.delete(enrolled.record.id, "owner-a")
    atlas = svc._pipeline_or_fail().cloner.atlas
    atlas.release.set()  # type: ignore[attr-defined]  # the report goes on, sees the delete

    def gone() -> bool:
        try:
            svc.get_job(job_id, "owner-a")
        except NotFound:
            return True
        return False

    until(gone)
