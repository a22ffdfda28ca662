"""The socket ``voxclone serve`` listens on, bound before anything else loads.

``voxclone serve`` binds it before it even imports the server (FastAPI and
SQLAlchemy: ~1.3 s of a 3.3 s refusal on a loaded 2-core host), so a taken
port is one line and exit 4 at once, not after the app's start-up.
"""

from __future__ import annotations

import errno
import socket

from voxclone.config import Settings


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` the way uvicorn binds one
    (SO_REUSEADDR, so a port in TIME_WAIT after a restart is not "in use");
    uvicorn listens on it."""
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def cannot_listen(settings: Settings, exc: OSError) -> str:
    """The one line for a port or address that cannot be bound."""
    where = f"{settings.host}:{settings.port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {settings.port} is in use on {settings.host} (another voxclone serve?); "
            f"stop that process or use --port N (VOXCLONE_PORT)"
        )
    if exc.errno == errno.EACCES:
        return f"no permission to listen on {where}: use --port N above 1023"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: {settings.host} is not an address of this host (--host)"
    return f"cannot listen on {where}: {exc.strerror or exc} (use --host or --port)"
