"""A report whose enrolling process was killed (SIGKILL) mid-run is finished by the next
process (moved from tests/unit/test_report_recovery.py, issue 51).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import report_fakes  # tests/unit (conftest.py)
import test_report_recovery as unit  # tests/unit (conftest.py)
from report_fakes import DRAFT_STYLE, until  # tests/unit (conftest.py)
from test_report_recovery import CHILD_LEASE_S, _assert_measured  # tests/unit (conftest.py)

from voxclone.runtime.job_store import SqlJobStore
from voxclone.service.voices.service import VoiceService

UNIT = Path(__file__).resolve().parents[1] / "unit"  # a child imports its helpers too

# Its fixtures, defined once there.
_fast_queue, db, services = unit._fast_queue, unit.db, unit.services


def _killed_mid_report(db: Path) -> tuple[str, str]:
    """(voice id, report job id) of an enrollment whose process was killed
    while its report job ran."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(UNIT), *sys.path])}
    child = subprocess.Popen(
        [sys.executable, str(Path(report_fakes.__file__)), str(db), str(CHILD_LEASE_S)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        voice_id, job_id = child.stdout.readline().split()
        with SqlJobStore(db, recover_on_open=False) as jobs:
            until(lambda: jobs.get(job_id, None).state == "running")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    return voice_id, job_id


def test_a_report_killed_mid_run_is_finished_after_its_lease_expires(
    db: Path, services: list[VoiceService]
) -> None:
    voice_id, job_id = _killed_mid_report(db)
    svc = report_fakes.service(db)  # the next process on the same database
    services.append(svc)
    draft = svc.get(voice_id, "owner-a")
    assert draft.quality["report_pending"] is True and np.allclose(draft.style, DRAFT_STYLE)
    job = until(lambda: (j := svc.get_job(job_id, "owner-a")).state == "succeeded" and j)
    assert job.attempts == 2  # the killed worker's attempt, then this one
    assert job.result["voice_id"] == voice_id and job.result["version"] == 2
    _assert_measured(svc, voice_id)


@pytest.mark.parametrize("left", ["no_job", "interrupted_legacy_job"])
def test_a_pending_voice_without_a_live_report_job_is_measured_at_start(
    db: Path, services: list[VoiceService], left: str
) -> None:
    """``no_job``: killed between storing the draft and queuing its job.
    ``interrupted_legacy_job``: the in-memory report job of earlier versions,
    failed at restart ("interrupted by restart") and never run again."""
    voice_id, job_id = _killed_mid_report(db)
    with SqlJobStore(db, recover_on_open=False) as jobs:
        jobs.delete(job_id, None)
        if left == "interrupted_legacy_job":
            legacy = jobs.create(kind="report", owner="owner-a", voice_id=voice_id)
            jobs.update(legacy.id, state="running", message="calibrating pitch and tone")
    time.sleep(CHILD_LEASE_S)  # the draft is older than a lease: no enrollment is queuing
    restarted = SqlJobStore(db)  # a single server's start: fails in-memory jobs left over
    if left == "interrupted_legacy_job":
        assert restarted.get(legacy.id, None).state == "failed"
    svc = report_fakes.service(db, jobs=restarted)
    services.append(svc)
    _assert_measured(svc, voice_id)

    def reports() -> list[str]:
        return [j.state for j in restarted.list("owner-a") if j.kind == "report" and j.payload]

    assert until(lambda: (states := reports()) and all(s != "running" for s in states) and states)
    assert reports() == ["succeeded"]
