"""The unmodified ``elevenlabs`` SDK (2.78.0, in the test extra) against a real
voxclone server: ``text_to_speech.convert_realtime`` streams an LLM-like
iterator of text over the stream-input WebSocket.

The SDK always turns its base URL into ``wss://`` for this call
(``realtime_tts.py``: ``_replace(scheme="wss")``), so the server here serves
TLS on 127.0.0.1 (``voxclone serve --ssl-certfile``'s uvicorn options) with a
throwaway certificate the client trusts through ``SSL_CERT_FILE``.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.api.conftest import LiveServer

pytestmark = [pytest.mark.models, pytest.mark.timed]

elevenlabs_client = pytest.importorskip("elevenlabs.client")


class TlsServer(LiveServer):
    def __init__(self, app: Any, cert: Path, key: Path) -> None:
        super().__init__(app)
        self.server.config.ssl_certfile = str(cert)
        self.server.config.ssl_keyfile = str(key)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


@pytest.fixture()
def tls_server(
    make_app: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TlsServer]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    app = make_app(allowed_hosts=["127.0.0.1"])
    key_text, _ = app.state.keys.create("agent", {"tts"}, owner="agent")
    app.state.test_key = key_text
    with TlsServer(app, cert, key) as server:
        yield server


def _llm(text: str, delay_s: float = 0.02) -> Iterator[str]:
    """Tokens as a language model writes them (~50 tokens/s)."""
    for token in text.split(" "):
        time.sleep(delay_s)
        yield token + " "


def test_unmodified_sdk_streams_audio(tls_server: TlsServer) -> None:
    client = elevenlabs_client.ElevenLabs(
        api_key=tls_server.app.state.test_key, base_url=tls_server.url
    )
    audio = b"".join(
        client.text_to_speech.convert_realtime(
            voice_id="clear_female",
            text=_llm("Hello from the agent. The answer is 42, as always."),
            output_format="pcm_24000",
        )
    )
    seconds = len(audio) / 2 / 24000
    assert seconds > 1.5, seconds


def test_unmodified_sdk_with_a_wrong_key_is_refused(tls_server: TlsServer) -> None:
    client = elevenlabs_client.ElevenLabs(api_key="vox_not_a_key", base_url=tls_server.url)
    with pytest.raises(Exception) as caught:
        b"".join(client.text_to_speech.convert_realtime(voice_id="clear_female", text=_llm("Hi.")))
    assert (
        "not valid" in str(caught.value)
        or "401" in str(caught.value)
        or "1008" in str(caught.value)
    )


def test_closing_the_sdk_stream_stops_the_engine(tls_server: TlsServer) -> None:
    """An agent that stops reading (barge-in: the SDK's generator closed)
    closes the socket; the server's queued engine work for it stops."""
    runtime = tls_server.app.state.runtime
    client = elevenlabs_client.ElevenLabs(
        api_key=tls_server.app.state.test_key, base_url=tls_server.url
    )
    long_text = " ".join(["This sentence is one of many that the agent will never finish."] * 12)
    stream = client.text_to_speech.convert_realtime(
        voice_id="clear_female", text=_llm(long_text, 0.0), output_format="pcm_16000"
    )
    first = next(stream)
    assert first
    closed = time.perf_counter()
    stream.close()  # the SDK closes its socket
    idle = threading.Event()
    while time.perf_counter() - closed < 10:
        if runtime.speech_idle():
            idle.set()
            break
        time.sleep(0.005)
    stopped = time.perf_counter() - closed
    assert idle.is_set(), "engine work went on after the client left"
    print(f"sdk cancel-to-engine-idle {stopped * 1000:.0f} ms")
