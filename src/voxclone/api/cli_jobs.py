"""Waiting for a server job from the CLI (a clone's quality report, a refinement,
a long text's speech job), with its progress on stderr.

The wait follows the job's server-sent events (``GET /v1/jobs/{id}/events``):
one request for the whole wait, so however long the job runs it draws one
token from the server's rate limit. If that stream cannot be had or breaks
off, the job is polled once every :data:`POLL_INTERVAL_S` — half the default
anonymous limit of 2 requests a second — and a 429 only delays the next poll
(Retry-After), never ends the wait. Ctrl-C cancels the job on the server.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from voxclone.api.cli_remote import RemoteError, call_json, opened_stream

POLL_INTERVAL_S = 1.0
DONE_STATES = frozenset({"succeeded", "failed", "cancelled"})
# Answers that no second try changes: the job is not there or not ours.
_FINAL_STATUSES = frozenset({401, 403, 404})


class Progress:
    """One status line on stderr: rewritten in place on a terminal, else a line
    per 10 % step (a log file should not get a line per event)."""

    def __init__(self, activity: str, out: TextIO | None = None) -> None:
        self.activity = activity
        self.out = out if out is not None else sys.stderr
        self.tty = self.out.isatty()
        self._shown: float | None = None

    def show(self, percent: float) -> None:
        if self.tty:
            if percent != self._shown:
                print(f"\r{self.activity} {percent:5.1f} %", end="", file=self.out, flush=True)
                self._shown = percent
            return
        step = float(int(percent // 10) * 10)
        if self._shown is None or step > self._shown:
            print(f"{self.activity} {percent:5.1f} %", file=self.out, flush=True)
            self._shown = step

    def end(self) -> None:
        """Close the line (once) so what follows starts on its own."""
        if self.tty and self._shown is not None:
            print(file=self.out, flush=True)
        self._shown = None
        self.tty = False  # nothing more is written in place


def wait_job(url: str, job_id: str, activity: str, *, api_key: str | None = None) -> dict[str, Any]:
    """The job as it ended (succeeded, failed or cancelled), showing its progress."""
    progress = Progress(activity)
    try:
        job = _follow_events(url, job_id, progress, api_key)
        if job is None:
            job = _poll(url, job_id, progress, api_key)
        return job
    except KeyboardInterrupt:
        progress.end()
        print(f"voxclone: cancelling job {job_id} on the server", file=sys.stderr)
        call_json(url, "POST", f"/v1/jobs/{job_id}/cancel", api_key=api_key)
        raise
    finally:
        progress.end()


def _follow_events(
    url: str, job_id: str, progress: Progress, api_key: str | None
) -> dict[str, Any] | None:
    """The job's end from its event stream; None if the stream is unavailable
    or closed before the end (the caller polls instead)."""
    try:
        with opened_stream(url, f"/v1/jobs/{job_id}/events", api_key=api_key) as response:
            for event, data in sse_events(response):
                if not isinstance(data, dict) or "state" not in data:
                    continue
                progress.show(float(data.get("progress", 0.0)))
                if event == "done" or data["state"] in DONE_STATES:
                    return data
    except RemoteError as exc:
        if exc.status in _FINAL_STATUSES:
            raise
    except OSError:  # the connection broke mid-stream
        pass
    return None


def _poll(url: str, job_id: str, progress: Progress, api_key: str | None) -> dict[str, Any]:
    while True:
        job = call_json(url, "GET", f"/v1/jobs/{job_id}", api_key=api_key, patience_s=None)
        progress.show(float(job.get("progress", 0.0)))
        if job["state"] in DONE_STATES:
            return job
        time.sleep(POLL_INTERVAL_S)


def sse_events(response: Any) -> Any:
    """(event name, decoded JSON data) for each server-sent event of ``response``
    (a binary file-like object read line by line); comments are skipped."""
    event = "message"
    data: list[str] = []
    for raw in response:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
    if data:
        yield event, json.loads("\n".join(data))
