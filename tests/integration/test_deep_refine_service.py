"""The deep refine as a user runs it (issue 47): the composition root wires it
where torch is installed, an enrollment keeps the reference as CAM++ heard it,
a refine job with ``method: "deep"`` descends through the differentiable
Kokoro, reports what the listeners heard on sentences it never optimized, and
either stores the refined voice as the next version or keeps the voice as it
was; a server with it turned off refuses the method and says why.

Real Kokoro (ONNX for the voice, the torch copy for the descent), real
listeners. Marked slow: building the copy takes ~10-25 s, a step ~7 s on 2
cores (2 steps here: the plumbing, not the gain, which
studies/deep_refine_gain.py measures).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="the deep refine needs torch ([deep] extra)")

from voxclone.bootstrap import build_runtime  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.errors import InvalidInput  # noqa: E402
from voxclone.service.voices.request import ConsentInput, EnrollRequest  # noqa: E402

pytestmark = [pytest.mark.models, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[1] / "data"
REFERENCE = DATA / "librispeech_1088-129236-0000.wav"
CONSENT = ConsentInput(True, "I agree that my voice is cloned for this test.", "tester")


def _wait(svc: Any, job_id: str, owner: str, timeout_s: float = 600.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = svc.get_job(job_id, owner)
        if job.done:
            return job
        time.sleep(0.2)
    raise AssertionError("deep refine job did not finish")


def test_a_deep_refine_job_descends_and_reports_what_was_heard(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", warm_cloning=False, deep_refine_steps=2)
    runtime = build_runtime(settings)
    try:
        voices = runtime.voices
        assert voices is not None
        if voices.deep_refine_missing is not None:
            pytest.skip(f"deep refine unavailable: {voices.deep_refine_missing}")
        record, _ = voices.enroll(
            EnrollRequest(REFERENCE.read_bytes(), "Deep", "local", CONSENT, match_tone=True)
        )
        # Stored only where a listener other than the print heard it (the
        # suite's pack-less models folder has no CAM++ weights).
        heard = record.quality.get("listener_embeddings", {})
        job = voices.start_refine(record.id, "local", method="deep")
        done = _wait(voices, job.id, "local")
        assert done.state == "succeeded", done.message
        result = done.result
        assert result["method"] == "deep"
        refine = result["refine"]
        assert refine["steps"] == 2
        assert set(refine["heard_before"]) == set(refine["heard_after"]) >= {"ge2e"}
        if "campplus" in refine["heard_before"]:  # CAM++ installed: the enrollment kept its view
            assert len(heard["campplus"]) == 192
        after = voices.get(record.id, "local")
        assert after.style is not None and record.style is not None
        if result["improved"]:
            assert after.version == record.version + 1 and after.source == "refined"
            assert len(after.quality["timbre_offset"]) == 128
            assert not np.array_equal(after.style, record.style)
        else:
            assert after.version == record.version
            assert np.array_equal(after.style, record.style)
    finally:
        runtime.close()


def test_a_server_with_the_deep_refine_off_refuses_it_and_says_why(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", warm_cloning=False, deep_refine=False)
    runtime = build_runtime(settings)
    try:
        voices = runtime.voices
        assert voices is not None
        assert voices.deep_refine_missing is not None
        assert "VOXCLONE_DEEP_REFINE" in voices.deep_refine_missing
        record, _ = voices.enroll(
            EnrollRequest(REFERENCE.read_bytes(), "Plain", "local", CONSENT, match_tone=True)
        )
        assert "listener_embeddings" not in record.quality
        with pytest.raises(InvalidInput) as refused:
            voices.start_refine(record.id, "local", method="deep")
        assert refused.value.field == "method" and "VOXCLONE_DEEP_REFINE" in str(refused.value)
    finally:
        runtime.close()
