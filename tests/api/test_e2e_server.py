"""End to end: ``voxclone serve`` in a subprocess, driven by the official ``openai`` client."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import soundfile as sf

from conftest import free_loopback_port

pytestmark = pytest.mark.e2e

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("e2e-home")
    port = free_loopback_port()
    env = {
        **os.environ,
        "VOXCLONE_HOME": str(home),
        "PYTHONPATH": os.pathsep.join(
            [str(Path("src").resolve()), os.environ.get("PYTHONPATH", "")]
        ),
    }
    log_path = home / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys; from voxclone.api.cli import main; "
             f"sys.exit(main(['serve', '--host', '127.0.0.1', '--port', '{port}']))"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited: {log_path.read_text()[-2000:]}")
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"server not ready: {log_path.read_text()[-2000:]}")
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_openai_client_whole_file(server_url: str) -> None:
    client = openai.OpenAI(base_url=f"{server_url}/v1", api_key="x")
    response = client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello from the server.", response_format="wav"
    )
    audio, rate = sf.read(io.BytesIO(response.content), dtype="float32")
    assert rate == 24_000
    assert 0.5 < len(audio) / rate < 6


def test_openai_client_streaming_mp3(server_url: str) -> None:
    client = openai.OpenAI(base_url=f"{server_url}/v1", api_key="x")
    buf = io.BytesIO()
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="onyx", input="Streaming works. Yes it does.",
        response_format="mp3",
    ) as response:
        assert response.headers["content-type"] == "audio/mpeg"
        for chunk in response.iter_bytes():
            buf.write(chunk)
    buf.seek(0)
    audio, rate = sf.read(buf, dtype="float32")
    assert 1.0 < len(audio) / rate < 8


def test_request_id_and_json_error_over_the_wire(server_url: str) -> None:
    r = httpx.post(f"{server_url}/v1/tts", json={"text": ""}, headers={"X-Request-ID": "e2e-1"})
    assert r.status_code == 422
    assert r.headers["x-request-id"] == "e2e-1"
    assert r.json()["error"]["field"] == "text"
