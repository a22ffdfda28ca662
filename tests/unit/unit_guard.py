"""tests/unit runs no subprocess and no server (issue 51): the guard that
tests/unit/conftest.py puts around every test there.

A unit test that starts a child process or listens on a socket fails at that
call with one line saying where such a test belongs. Tests with real
components in-process or child processes (the CLI, a script) live in
tests/integration; tests of real server processes in tests/e2e.

The shared servers of tests/conftest.py (PostgreSQL, moto's S3, Redis) are
session-scoped fixtures that a test asks for by name (and says so with its
``postgres`` / ``redis`` marker): starting one of those is not the test's own
doing and is let through; a test, or a function-scoped fixture, is not.
"""

from __future__ import annotations

import _posixsubprocess
import asyncio
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn

import pytest
from _pytest.fixtures import FixtureDef

MESSAGE = (
    "tests/unit runs no subprocess or server: move this test to tests/integration or tests/e2e"
)

_EXECUTE = FixtureDef.execute.__code__


def _innermost_fixture_is_shared(frame: FrameType | None) -> bool | None:
    while frame is not None:
        if frame.f_code is _EXECUTE:
            fixturedef = frame.f_locals.get("self")
            return getattr(fixturedef, "scope", "function") != "function"
        frame = frame.f_back
    return None


def _in_a_shared_fixture() -> bool:
    """Whether the innermost fixture being set up is wider than one test: on
    this thread's stack, or (for a server thread such a fixture started, as
    moto's) on the main thread's, where pytest sets fixtures up."""
    here = _innermost_fixture_is_shared(sys._getframe(2))
    if here is not None or threading.current_thread() is threading.main_thread():
        return bool(here)
    main = sys._current_frames().get(threading.main_thread().ident or 0)
    return bool(_innermost_fixture_is_shared(main))


def _refuse(what: str) -> NoReturn:
    pytest.fail(f"{MESSAGE} (it called {what})", pytrace=True)


def _guarded(what: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def guard(*args: Any, **kwargs: Any) -> Any:
        if not _in_a_shared_fixture():
            _refuse(what)
        return original(*args, **kwargs)

    return guard


def _refusing_coroutine(what: str) -> Callable[..., Any]:
    async def guard(*args: Any, **kwargs: Any) -> Any:
        _refuse(what)

    return guard


def install_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse child processes and listening sockets until ``monkeypatch`` is undone."""
    targets: list[tuple[Any, str, str]] = [
        (subprocess.Popen, "__init__", "subprocess.Popen"),
        # What subprocess and multiprocessing's spawn and forkserver start with.
        (_posixsubprocess, "fork_exec", "_posixsubprocess.fork_exec"),
        (socket.socket, "listen", "socket.listen"),
    ]
    targets += [
        (os, name, f"os.{name}")
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system")
        if hasattr(os, name)
    ]
    for owner, name, what in targets:
        monkeypatch.setattr(owner, name, _guarded(what, getattr(owner, name)))
    for name in ("create_subprocess_exec", "create_subprocess_shell"):
        monkeypatch.setattr(asyncio, name, _refusing_coroutine(f"asyncio.{name}"))
