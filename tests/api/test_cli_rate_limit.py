"""The CLI through a real HTTP server whose rate limit is tight: ``voxclone clone
--refine`` waits out its jobs instead of exiting on "too many requests".

uvicorn serves the real app (auth, the real token-bucket limiter, job routes
and their server-sent events) on a loopback port; the voice service is the
route-test fake, whose jobs a thread moves along over a few seconds, so the
wait is long enough to exceed the limit when polled 4 times a second (what
the CLI did, and exited 2 on the first 429).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fake_voices import FakeJobView, FakeVoiceService

from voxclone.api import cli
from voxclone.api.cli_remote import RemoteError, call_json
from voxclone.runtime.job_store import JobEvents

# One request a second after a burst of 3: above it the server answers 429.
TIGHT = {"rate_limit_per_minute": 60.0, "rate_limit_burst": 3.0}


@pytest.fixture()
def fake(runtime: Any, app_runtime: Any) -> Iterator[FakeVoiceService]:
    service = FakeVoiceService(runtime.catalog, JobEvents())
    app_runtime.replace(voices=service, jobs=FakeJobView(service), job_events=service.events)
    stop = threading.Event()

    def work() -> None:
        # Every job gains 10 % every 0.3 s: ~3 s from queued to succeeded.
        while not stop.wait(0.3):
            for job in list(service.jobs.values()):
                if job.state in ("succeeded", "failed", "cancelled"):
                    continue
                progress = min(100.0, job.progress + 10.0)
                done = progress >= 100.0
                service.advance(
                    job.id,
                    state="succeeded" if done else "running",
                    progress=progress,
                    message="done" if done else "working",
                )
                if done and job.kind == "refine":
                    voice = service.voices[job.voice_id or ""]
                    service.voices[voice.id] = replace(
                        voice, version=voice.version + 1, source="refined"
                    )

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    yield service
    stop.set()
    worker.join(5)


def test_clone_refine_waits_through_a_tight_rate_limit(
    fake: FakeVoiceService,
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    clip = tmp_path / "ada.wav"
    clip.write_bytes(b"RIFF" + b"\0" * 400)
    with live_server(**TIGHT) as server:
        started = time.monotonic()
        code = cli.main(
            ["clone", str(clip), "--name", "ada", "--consent", "--refine", "--server", server.url]
            + ["--json"]
        )
        elapsed = time.monotonic() - started
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "too many requests" not in out.err
    summary = json.loads(out.out)
    assert summary["name"] == "ada" and summary["source"] == "refined"
    kinds = [job.kind for job in fake.jobs.values()]
    assert kinds == ["report", "refine"]
    assert all(job.state == "succeeded" for job in fake.jobs.values())
    # Two ~3 s jobs, waited for, not failed fast.
    assert elapsed > 5.0, elapsed


def test_calls_retry_a_429_after_its_retry_after(fake: FakeVoiceService, live_server: Any) -> None:
    with live_server(rate_limit_per_minute=60.0, rate_limit_burst=2.0) as server:
        # Twice the burst in a row: the later calls are refused at first (429,
        # Retry-After: 1) and succeed on a later try.
        started = time.monotonic()
        answers = [call_json(server.url, "GET", "/v1/voices") for _ in range(4)]
        assert all(answer == {"voices": []} for answer in answers)
        assert time.monotonic() - started >= 1.0  # it did wait for the bucket
        # Without patience the same burst is a 429 carrying the server's wait.
        with pytest.raises(RemoteError) as refused:
            for _ in range(4):
                call_json(server.url, "GET", "/v1/voices", patience_s=0)
        assert refused.value.status == 429 and refused.value.retry_after == 1.0


def test_clone_deep_asks_the_server_for_a_deep_refine(
    fake: FakeVoiceService,
    live_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "cli-home"))
    clip = tmp_path / "ada.wav"
    clip.write_bytes(b"RIFF" + b"\0" * 400)
    with live_server() as server:
        code = cli.main(
            ["clone", str(clip), "--name", "ada", "--consent", "--deep"]
            + ["--server", server.url, "--json"]
        )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert fake.refine_methods == ["deep"]  # --deep implies --refine
    assert json.loads(out.out)["source"] == "refined"
