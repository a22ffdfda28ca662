"""The test session is offline: only loopback connections are allowed.

pytest-socket is configured in pyproject.toml (``--allow-hosts``), so any
code path that tries to download weights or data at run time fails the
test that reached it instead of quietly depending on the network.
"""

from __future__ import annotations

import socket
import urllib.request

import pytest
from pytest_socket import SocketConnectBlockedError

# Documentation-only addresses (RFC 5737 / RFC 3849): never a real host.
NON_LOOPBACK = [("203.0.113.7", socket.AF_INET), ("2001:db8::7", socket.AF_INET6)]


@pytest.mark.parametrize(("address", "family"), NON_LOOPBACK)
def test_a_non_loopback_connect_is_refused(address: str, family: socket.AddressFamily) -> None:
    with (
        socket.socket(family, socket.SOCK_STREAM) as sock,
        pytest.raises(SocketConnectBlockedError),
    ):
        sock.settimeout(0.5)
        sock.connect((address, 443))


def test_a_download_attempt_is_refused() -> None:
    # What a library fetching weights would do (an IP, so no DNS lookup is needed).
    with pytest.raises(SocketConnectBlockedError):
        urllib.request.urlopen("http://203.0.113.7/model.onnx", timeout=0.5)
