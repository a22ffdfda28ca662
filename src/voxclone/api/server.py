"""``voxclone serve``: run the app under uvicorn, refusing unsafe exposure.

Without an active API key every request runs with full rights, so the server
then binds only to loopback; asking for any other address without keys is
refused with exit code 2 before anything listens.
"""

from __future__ import annotations

import ipaddress
import logging
import sys

from voxclone.api.auth import key_db_path
from voxclone.api.observability import configure_json_logging
from voxclone.config import Settings
from voxclone.runtime.keys import KeyStore

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
    store = KeyStore(key_db_path(settings.home))
    try:
        return store.count_active()
    finally:
        store.close()


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


def serve(settings: Settings) -> int:
    problem = check_exposure(settings)
    if problem is not None:
        print(f"voxclone: error: {problem}", file=sys.stderr)
        return EXIT_REFUSED
    configure_json_logging()
    if _active_keys(settings) == 0:
        log.warning(
            "NO API KEYS: every request runs as 'local' with full rights; "
            "listening on loopback %s only. Create a key before exposing this server.",
            settings.host,
        )

    import uvicorn

    from voxclone.api.app import create_app

    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        ssl_certfile=settings.ssl_certfile,
        ssl_keyfile=settings.ssl_keyfile,
        log_config=None,  # keep our JSON handler
        access_log=False,  # our middleware writes the access log, without secrets
        server_header=False,
        timeout_graceful_shutdown=10,
    )
    uvicorn.Server(config).run()
    return 0
