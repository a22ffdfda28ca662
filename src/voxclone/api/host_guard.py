"""Host and Origin checks: a loopback server must not be reachable from web pages.

Without API keys every request runs with full rights, so the only thing
between a web page the user visits and the voice library is the browser's
same-origin policy. Two attacks go around it:

* **DNS rebinding**: ``evil.example`` resolves to 127.0.0.1 and the page reads
  our responses as same-origin. The request still carries ``Host:
  evil.example``, so without keys only loopback Host headers are accepted.
* **Cross-site requests** (a form POST, a ``no-cors`` fetch): they cannot read
  the answer but can make the server work or change state. Browsers label them
  with ``Origin`` and ``Sec-Fetch-Site``; without keys a request whose Origin
  is not the server's own (or an allowed one) is refused, and so is a
  state-changing request marked ``Sec-Fetch-Site: cross-site``.

With keys, requests need a bearer key that a foreign page does not have
(keys never live in cookies), so Host and Origin are only checked against the
allow-lists when the operator sets them. Health probes are exempt: they carry
no data and orchestrators call them by pod address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from fastapi.responses import JSONResponse

from voxclone.api.errors import error_body
from voxclone.api.header_guard import header_values

# Probes answer without data; orchestrators call them by address, not name.
EXEMPT_PATHS = frozenset({"/healthz", "/readyz"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def split_host(value: str) -> tuple[str, int | None] | None:
    """(lower-case host name, port) of a Host header value; None if malformed."""
    value = value.strip().lower()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:]
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep:
            host, port_text = value, ""
        if ":" in host:
            return None  # an unbracketed IPv6 address is not a valid Host header
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            return None
        return host, int(port_text)
    return host, None


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost (with or without a trailing dot)."""
    host = host.rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_matches(host: str, pattern: str) -> bool:
    """``pattern`` is a host name, ``*`` (any), or ``.example.com`` (it and its subdomains)."""
    pattern = pattern.strip().lower()
    if pattern == "*":
        return True
    if pattern.startswith("."):
        return host == pattern[1:] or host.endswith(pattern)
    parsed = split_host(pattern)
    return parsed is not None and parsed[0] == host


def _normalize_origin(origin: str) -> str | None:
    """``scheme://host[:port]`` with the default port dropped; None if not an origin."""
    parts = urlsplit(origin.strip().lower())
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None or port == _DEFAULT_PORTS[parts.scheme]:
        return f"{parts.scheme}://{host}"
    return f"{parts.scheme}://{host}:{port}"


class HostGuardMiddleware:
    """Refuse requests with a foreign Host or Origin (403 JSON) before any route runs.

    ``keys_active`` says whether the server has API keys (single-user mode
    otherwise); ``allowed_hosts`` and ``allowed_origins`` are the operator's
    allow-lists (CORS origins count as allowed origins).
    """

    def __init__(
        self,
        app: Any,
        *,
        keys_active: Callable[[], bool],
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        self._keys_active = keys_active
        self._hosts = [h for h in allowed_hosts if h.strip()]
        self._origins = {o for o in (_normalize_origin(x) for x in allowed_origins) if o}
        self._any_origin = any(x.strip() == "*" for x in allowed_origins)

    def _host_allowed(self, host: str, keys: bool) -> bool:
        if is_loopback_host(host) or any(_host_matches(host, p) for p in self._hosts):
            return True
        # With keys and no allow-list every name is fine: the key is the gate.
        return keys and not self._hosts

    def _origin_listed(self, normalized: str | None) -> bool:
        return normalized is not None and (self._any_origin or normalized in self._origins)

    def refusal(self, scope: dict[str, Any]) -> str | None:
        """Why this request is refused, or None."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        hosts = header_values(scope, b"host")
        if len(hosts) > 1:
            # The dict above keeps the last copy, the app reads the first: with
            # two, a foreign name could hide behind a loopback one. The header
            # guard refuses repeats first (400); this holds without it.
            return "the request has more than one Host header"
        keys = self._keys_active()
        host_header = headers.get("host", "")
        parsed = split_host(host_header)
        if parsed is None or not self._host_allowed(parsed[0], keys):
            return (
                f"the Host header '{host_header[:80]}' is not allowed; without API keys only "
                "loopback names are (set VOXCLONE_ALLOWED_HOSTS to allow others)"
            )
        origin = headers.get("origin")
        normalized = None if origin is None else _normalize_origin(origin)
        listed = self._origin_listed(normalized)
        if origin is not None:
            scheme = str(scope.get("scheme", "http"))
            same = normalized is not None and normalized == _normalize_origin(
                f"{scheme}://{host_header}"
            )
            # With keys and no allow-list, the key is the gate (it never sits in a cookie).
            lenient = keys and not self._origins and not self._any_origin
            if not (same or listed or lenient):
                return (
                    f"cross-origin request from '{origin[:80]}' refused "
                    "(set VOXCLONE_ALLOWED_ORIGINS to allow it)"
                )
        site = headers.get("sec-fetch-site", "").strip().lower()
        method = str(scope.get("method", "GET")).upper()
        if site == "cross-site" and method not in SAFE_METHODS and not listed:
            # The browser says another site made this request (a form post, for
            # instance): only an origin the operator listed may change state.
            return "cross-site request refused (set VOXCLONE_ALLOWED_ORIGINS to allow its origin)"
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        reason = self.refusal(scope)
        if reason is None:
            await self.app(scope, receive, send)
            return
        response = JSONResponse(error_body("forbidden_host", reason, field="host"), status_code=403)
        await response(scope, receive, send)
