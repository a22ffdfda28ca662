"""The guard of tests/unit/unit_guard.py (issue 51): no subprocess, no server here."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import subprocess
import threading

import pytest
from unit_guard import MESSAGE, install_guard


@pytest.fixture()
def guarded() -> object:
    with pytest.MonkeyPatch.context() as patch:
        install_guard(patch)
        yield


def _refused(call: object) -> str:
    with pytest.raises(pytest.fail.Exception) as refused:
        call()  # type: ignore[operator]
    return str(refused.value)


@pytest.mark.usefixtures("guarded")
def test_a_subprocess_is_refused_with_where_the_test_belongs() -> None:
    message = _refused(lambda: subprocess.run(["true"], check=True))
    assert message.startswith(MESSAGE) and "subprocess.Popen" in message


@pytest.mark.usefixtures("guarded")
def test_forks_spawns_and_shells_are_refused() -> None:
    assert "os.fork" in _refused(os.fork)
    assert "os.system" in _refused(lambda: os.system("true"))
    assert "os.posix_spawn" in _refused(lambda: os.posix_spawn("/bin/true", ["true"], {}))
    spawn = multiprocessing.get_context("spawn").Process(target=print)
    assert MESSAGE in _refused(spawn.start)


@pytest.mark.usefixtures("guarded")
def test_an_asyncio_subprocess_is_refused() -> None:
    message = _refused(lambda: asyncio.run(asyncio.create_subprocess_exec("true")))
    assert "asyncio.create_subprocess_exec" in message


@pytest.mark.usefixtures("guarded")
def test_a_listening_socket_is_refused_and_a_socketpair_or_thread_is_not() -> None:
    server = socket.socket()
    try:
        server.bind(("127.0.0.1", 0))
        assert "socket.listen" in _refused(lambda: server.listen())
    finally:
        server.close()
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"x")
        assert right.recv(1) == b"x"
    seen: list[int] = []
    worker = threading.Thread(target=seen.append, args=(1,))
    worker.start()
    worker.join()
    assert seen == [1]
    assert asyncio.run(asyncio.sleep(0, "loop")) == "loop"  # its self-pipe is a socketpair


def test_every_unit_test_runs_under_the_guard() -> None:
    """The autouse fixture is on for this very test."""
    assert MESSAGE in _refused(lambda: subprocess.run(["true"], check=True))
