"""Release check of the container image (docs/deploy.md, README "Container").

Runs the built image as a user would: start it on a named volume, wait for
``/readyz`` within a bound, read the admin key the first start prints, speak
a sentence (Whisper WER on the host), clone a LibriSpeech speaker with
consent, restart the container on the same volume and find the voice and the
key still there, and stop cleanly. Figures (cold start, RSS, stop time) go to
``bench/results/container_image.json``.

Not part of CI (``make test`` skips it: it needs podman and a built image):
``make image && make image-smoke``, or
``VOXCLONE_IMAGE=localhost/voxclone:latest pytest -m slow tests/container``.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[2]
PODMAN = str(ROOT / "scripts" / "container" / "podman.sh")
IMAGE = os.environ.get("VOXCLONE_IMAGE", "")
READY_BOUND_S = float(os.environ.get("VOXCLONE_IMAGE_READY_BOUND_S", "600"))
RESULTS = ROOT / "bench" / "results" / "container_image.json"
CLIP = ROOT / "tests" / "data" / "librispeech_1088-129236-0000.wav"
SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank."
KEY_PATTERN = re.compile(r"\bvox_[A-Za-z0-9_-]{32}\b")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(
        not IMAGE or shutil.which("podman") is None,
        reason="release check: set VOXCLONE_IMAGE to a built image (make image-smoke)",
    ),
]


def podman(*args: str, timeout: float = 120, check: bool = True) -> str:
    proc = subprocess.run(
        [PODMAN, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout + proc.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Container:
    """One run of the image on a named volume, published on loopback."""

    def __init__(self, volume: str, port: int) -> None:
        self.volume, self.port = volume, port
        self.name = f"voxclone-smoke-{uuid.uuid4().hex[:8]}"
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> float:
        t0 = time.monotonic()
        podman(
            "run", "-d", "--name", self.name, "--stop-timeout", "30",
            "-p", f"127.0.0.1:{self.port}:8000", "-v", f"{self.volume}:/data", IMAGE,
        )  # fmt: skip
        deadline = t0 + READY_BOUND_S
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            state = podman("inspect", "-f", "{{.State.Status}}", self.name).strip()
            assert state == "running", f"container {state}:\n{self.logs()[-3000:]}"
            time.sleep(0.5)
        raise AssertionError(f"/readyz not 200 within {READY_BOUND_S} s:\n{self.logs()[-3000:]}")

    def logs(self) -> str:
        return podman("logs", self.name, check=False)

    def rss_mb(self) -> float:
        out = podman("stats", "--no-stream", "--format", "{{.MemUsage}}", self.name)
        used = out.split("/")[0].strip()  # e.g. "1.234GB"
        number, unit = re.fullmatch(r"([\d.]+)\s*([kKMG]i?B|B)", used).groups()  # type: ignore[union-attr]
        scale = {"B": 1e-6, "kB": 1e-3, "KB": 1e-3, "KiB": 1.024e-3, "MB": 1, "MiB": 1.048576}
        scale |= {"GB": 1e3, "GiB": 1073.741824}
        return float(number) * scale[unit]

    def stop(self) -> tuple[float, int]:
        t0 = time.monotonic()
        podman("stop", "-t", "30", self.name, timeout=60)
        seconds = time.monotonic() - t0
        code = int(podman("inspect", "-f", "{{.State.ExitCode}}", self.name).strip())
        return seconds, code

    def remove(self) -> None:
        podman("rm", "-f", self.name, check=False)


@pytest.fixture()
def volume() -> Iterator[str]:
    name = f"voxclone-smoke-{uuid.uuid4().hex[:8]}"
    podman("volume", "create", name)
    yield name
    podman("volume", "rm", "-f", name, check=False)


def speak(client: httpx.Client, text: str, voice: str) -> tuple[np.ndarray, int]:
    response = client.post("/v1/tts", json={"text": text, "voice": voice, "format": "wav"})
    assert response.status_code == 200, response.text
    audio, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    return np.asarray(audio), int(rate)


def test_image_serves_clones_and_keeps_voices_across_restarts(volume: str) -> None:
    from voxclone.synth.voice.asr import Transcriber

    size = podman("image", "inspect", "--format", "{{.Size}}", IMAGE).strip()
    figures: dict[str, Any] = {
        "command": f"VOXCLONE_IMAGE={IMAGE} pytest -m slow tests/container (make image-smoke)",
        "image": IMAGE,
        "image_size_mb": round(int(size) / 1e6, 1),
        "load_average_before": os.getloadavg()[0],
    }
    first = Container(volume, free_port())
    try:
        figures["cold_start_to_ready_s"] = round(first.start(), 2)
        keys = KEY_PATTERN.findall(first.logs())
        assert len(keys) == 1, "the first start prints exactly one admin key"
        headers = {"Authorization": f"Bearer {keys[0]}"}
        with httpx.Client(base_url=first.url, headers=headers, timeout=120) as client:
            assert httpx.post(first.url + "/v1/tts", json={"text": "hi"}).status_code == 401

            audio, rate = speak(client, SENTENCE, "clear_female")
            duration = len(audio) / rate
            rms = float(np.sqrt(np.mean(audio**2)))
            wer = Transcriber().wer(audio, rate, SENTENCE)
            figures |= {"speech_s": round(duration, 2), "speech_rms": round(rms, 4)}
            figures["wer"] = round(wer, 3)
            assert 2.0 < duration < 10.0 and rms > 0.01
            assert wer <= 0.2, f"WER {wer:.2f}"

            with CLIP.open("rb") as handle:
                enrolled = client.post(
                    "/v1/voices",
                    files={"audio": (CLIP.name, handle, "audio/wav")},
                    data={
                        "name": "smoke-speaker",
                        "consent": "true",
                        "consent_statement": "I agree to have my voice cloned for this test.",
                    },
                )
            assert enrolled.status_code == 201, enrolled.text
            voice_id = enrolled.json()["id"]
            cloned, rate = speak(client, "Hello from the cloned voice.", voice_id)
            assert len(cloned) / rate > 1.0 and float(np.sqrt(np.mean(cloned**2))) > 0.01
            figures["rss_mb_after_clone"] = round(first.rss_mb(), 1)

        stop_s, code = first.stop()
        figures["stop_s"] = round(stop_s, 2)
        assert code == 0, f"exit code {code}:\n{first.logs()[-2000:]}"
        assert "Traceback" not in first.logs()
    finally:
        first.remove()

    second = Container(volume, free_port())
    try:
        figures["warm_restart_to_ready_s"] = round(second.start(), 2)
        assert not KEY_PATTERN.findall(second.logs()), "a key is printed only on first start"
        with httpx.Client(base_url=second.url, headers=headers, timeout=120) as client:
            listed = client.get("/v1/voices")
            assert listed.status_code == 200, listed.text
            assert voice_id in [v["id"] for v in listed.json()["voices"]]
            speak(client, "Still here after a restart.", voice_id)
        figures["rss_mb_idle_after_restart"] = round(second.rss_mb(), 1)
        stop_s, code = second.stop()
        assert code == 0
    finally:
        second.remove()

    figures["load_average_after"] = os.getloadavg()[0]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
