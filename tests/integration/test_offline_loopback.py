"""Offline mode still lets loopback servers listen (moved from tests/unit/test_offline.py, issue
51: tests/unit runs no subprocess or server).
"""

from __future__ import annotations

import socket

from voxclone.devserver import free_loopback_port


def test_loopback_stays_open() -> None:
    port = free_loopback_port()
    with socket.create_server(("127.0.0.1", port)) as server:
        client = socket.create_connection(("127.0.0.1", port), timeout=2)
        accepted, _ = server.accept()
        client.close()
        accepted.close()
