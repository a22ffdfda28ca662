"""The CLI's server probe waits for a busy server instead of loading the models itself.

A server whose event loop is busy answers /readyz late; with a 0.2 s probe
the CLI decided "no server" and spent 8-16 s loading the models in-process
(issue 40's README walk at load ~11). The stand-in server here is real HTTP
on loopback that answers /readyz after 0.6 s.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from voxclone.api.cli_remote import server_ready

DELAY_S = 0.6


class _SlowReady(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        time.sleep(DELAY_S)
        body = json.dumps({"status": "ready"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowReady)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_slow_server_is_still_found(slow_server: str) -> None:
    assert server_ready(slow_server)


def test_no_server_is_decided_at_once() -> None:
    with socket.socket() as sock:  # a free loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    assert not server_ready(f"http://127.0.0.1:{port}")
    assert time.monotonic() - started < 0.5
