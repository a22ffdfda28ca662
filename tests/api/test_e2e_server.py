"""End to end: ``voxclone serve`` in a subprocess, driven by the official ``openai`` client."""

from __future__ import annotations

import io
from collections.abc import Iterator

import httpx
import pytest
import soundfile as sf

from voxclone.devserver import ServerNotReady, running_server

pytestmark = [pytest.mark.e2e, pytest.mark.models]  # the server loads Kokoro

openai = pytest.importorskip("openai")


# ``voxclone serve`` itself (not the bare app factory), as an operator starts it.
_CLI_SERVE = (
    "import os, sys; from voxclone.api.cli import main; "
    "sys.exit(main(['serve', '--host', '127.0.0.1', '--port', os.environ['VOXCLONE_PORT']]))"
)


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("e2e-home")
    try:
        with running_server(home, timeout_s=90, launcher=_CLI_SERVE) as server:
            yield server.url
    except ServerNotReady as exc:
        pytest.fail(str(exc))


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
        model="gpt-4o-mini-tts",
        voice="onyx",
        input="Streaming works. Yes it does.",
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
