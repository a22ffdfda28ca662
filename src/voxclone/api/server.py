"""``voxclone serve``: run the app under uvicorn, refusing unsafe exposure.

Once the server listens and the models are warm (``/readyz`` is 200) it
prints one plain line to stdout: where the web UI and the API docs are.

Without an active API key every request runs with full rights, so the server
then binds only to loopback; asking for any other address without keys is
refused with exit code 2 before anything listens, unless
``VOXCLONE_BOOTSTRAP_ADMIN_KEY`` lets the first start create an admin key
(``api/first_key.py``; the container image does).

The port is bound before anything else is built (``api/listen_socket.py``):
a port another process holds is one line naming ``--port`` and exit code 4
(:data:`EXIT_CANNOT_LISTEN`), where uvicorn only tried it after the app's
start-up, printed "Application startup complete", a raw ``Errno 98`` and went
on loading the models for ~6 s. The bound socket is handed to uvicorn, so no
other process can take the port in between.

Ctrl-C is the ordinary way to stop a server started by hand (``make run``):
it exits 0 after the graceful shutdown (uvicorn re-raises the signal, which
made ``make`` report "Error 130"), and at once while the models are still
loading, instead of waiting seconds for the loader thread.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

from voxclone.api.cli_exit import EXIT_CANNOT_LISTEN
from voxclone.api.first_key import announce_key, create_first_admin_key
from voxclone.api.listen_socket import bind_socket, cannot_listen
from voxclone.api.observability import configure_logging
from voxclone.config import Settings
from voxclone.key_setup import open_key_store

EXIT_REFUSED = 2
log = logging.getLogger("voxclone.api")


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def _active_keys(settings: Settings) -> int:
    with open_key_store(settings) as store:
        return store.count_active()


def keys_notice(settings: Settings) -> str | None:
    """What the start-up log says about API keys when none is active (None
    when one is): key-less single-user mode, or every key revoked."""
    with open_key_store(settings) as store:
        if store.count_active():
            return None
        ever = bool(store.list(include_revoked=True))
    if ever or settings.require_keys:
        return (
            "NO ACTIVE API KEYS: every key has been revoked, so every API request is "
            f"refused (401) until one is created with 'voxclone keys create'; listening on "
            f"loopback {settings.host} only. The server does not return to key-less mode."
        )
    return (
        "NO API KEYS: every request runs as 'local' with full rights; listening on "
        f"loopback {settings.host} only. Create a key before exposing this server."
    )


def check_exposure(settings: Settings) -> str | None:
    """The reason this configuration must not start, or None if it may."""
    if bool(settings.ssl_certfile) != bool(settings.ssl_keyfile):
        return (
            "TLS needs both a certificate and a key (VOXCLONE_SSL_CERTFILE, VOXCLONE_SSL_KEYFILE)"
        )
    keys = _active_keys(settings)
    if keys == 0 and settings.require_keys:
        return "keys are required but none exists; create one with 'voxclone keys create'"
    if keys == 0 and not is_loopback(settings.host):
        return (
            f"refusing to listen on {settings.host} without API keys; create one with "
            "'voxclone keys create --name NAME --scopes tts' or bind to 127.0.0.1"
        )
    return None


def serve(settings: Settings, listening: socket.socket | None = None) -> int:
    """Run the server until it is stopped; ``listening``: the socket already
    bound to the configured address (``voxclone serve`` binds it before it
    imports this module), else bound here."""
    if settings.bootstrap_admin_key:
        created = create_first_admin_key(settings)
        if created is not None:
            announce_key(*created)
    problem = check_exposure(settings)
    if problem is not None:
        print(f"voxclone: error: {problem}", file=sys.stderr)
        return EXIT_REFUSED
    if listening is None:
        try:
            listening = bind_socket(settings.host, settings.port)
        except OSError as exc:
            print(f"voxclone: error: {cannot_listen(settings, exc)}", file=sys.stderr)
            return EXIT_CANNOT_LISTEN
    with listening:
        problem = _blob_store_problem(settings)
        if problem is not None:
            print(f"voxclone: error: {problem}", file=sys.stderr)
            return EXIT_REFUSED
        return _run(settings, listening)


def _run(settings: Settings, listening: socket.socket) -> int:
    configure_logging(settings.log_format)
    notice = keys_notice(settings)
    if notice is not None:
        log.warning("%s", notice)

    import uvicorn

    from voxclone.api.app import create_app

    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        ssl_certfile=settings.ssl_certfile,
        ssl_keyfile=settings.ssl_keyfile,
        log_config=None,  # keep our JSON handler
        access_log=False,  # our middleware writes the access log, without secrets
        server_header=False,
        timeout_graceful_shutdown=10,
    )
    server = _server(config, app)
    threading.Thread(
        target=_announce_when_ready,
        args=(server, app, settings),
        name="voxclone-ready-line",
        daemon=True,
    ).start()
    # uvicorn raises the Ctrl-C it has just shut down for again: the stop was clean.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[listening])
    print("voxclone: stopped", file=sys.stderr, flush=True)
    return 0


def _server(config: Any, app: Any) -> Any:
    """uvicorn's server, stopping at once on Ctrl-C while the models load."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            state = app.state
            loading = state.runtime is None and not getattr(state, "startup_error", None)
            if sig == signal.SIGINT and loading:
                # Nothing is served yet, and what the loader writes (database
                # migrations, the optimized model's cache) survives a kill, as
                # it must anyway: a person pressing Ctrl-C should not wait.
                print(
                    "voxclone: stopped while the models were loading", file=sys.stderr, flush=True
                )
                os._exit(0)
            super().handle_exit(sig, frame)

    return Server(config)


def _blob_store_problem(settings: Settings) -> str | None:
    """Checked once before listening: a missing bucket or wrong credentials is one
    readable line and EXIT_REFUSED, not a traceback on the first enrollment."""
    from voxclone.bootstrap import check_blob_store

    return check_blob_store(settings)


def base_url(settings: Settings) -> str:
    scheme = "https" if settings.ssl_certfile else "http"
    host = settings.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6 literal
    return f"{scheme}://{host}:{settings.port}"


def ready_line(settings: Settings) -> str:
    url = base_url(settings)
    return f"voxclone ready — web UI {url}/  API docs {url}/docs"


def _announce_when_ready(server: Any, app: Any, settings: Settings) -> None:
    """Print the ready line once uvicorn listens *and* the runtime is built.

    The same two facts make ``/readyz`` answer 200, so the line never
    promises a server that would still refuse work. A failed model load gets
    no line (its error is logged and shown on ``/readyz``).
    """
    while not server.should_exit:
        if getattr(app.state, "startup_error", None):
            return
        if server.started and getattr(app.state, "runtime", None) is not None:
            line = ready_line(settings)
            try:
                print(line, flush=True)
            except UnicodeEncodeError:  # a stdout that cannot say "—"
                print(line.replace("—", "-"), flush=True)
            return
        time.sleep(0.1)
