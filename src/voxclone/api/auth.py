"""Bearer API keys with scopes, checked once per request.

While no key exists the server is in single-user mode: every request runs
as owner ``local`` with every scope (the server then only binds to loopback;
see ``server.py``). A ``vox_…`` key sent to such a server is refused (401): it
cannot be one of its keys, and accepting it would hide that the client talks
to another server than it thinks, or that its keys were lost. Any other
bearer token (the placeholder an OpenAI client must send) is ignored.

As soon as one key has been created, every API request needs
``Authorization: Bearer vox_…`` — still after all keys are revoked, so
revoking a leaked last key locks the server instead of opening it (the 401
then says so, as do ``voxclone keys revoke`` and the start-up log).

The same dependency then takes the caller's rate-limit token: per-caller
token buckets, in-process by default, Redis when configured. The bucket key
is the API key id, or the client address for anonymous (single-user mode)
callers, so one noisy client cannot starve the others. With Redis every
server process and replica draws from the same bucket. The limiter itself is
built by the composition root (``bootstrap.build_rate_limiter``).

Every response of a rate-limited route, 200 and 429 alike, says where its
caller's bucket stands (:class:`RateLimitHeadersMiddleware`):
``X-RateLimit-Limit`` (the bucket's size, ``rate_limit_burst``),
``X-RateLimit-Remaining`` (whole requests left now) and ``X-RateLimit-Reset``
(seconds until the bucket is full again, rounded up, as the IETF draft's
``RateLimit-Reset`` counts them; a 429 adds ``Retry-After``, when one
request passes again).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request

from voxclone.errors import Forbidden, RateLimited, Unauthorized
from voxclone.runtime.key_scopes import LOCAL_OWNER, SCOPE_UNMARKED
from voxclone.runtime.keys import (
    KEY_PREFIX,
    SCOPE_TTS,
    SCOPE_VOICES_READ,
    SCOPE_VOICES_WRITE,
    SCOPES,
    KeyStore,
)
from voxclone.runtime.metrics import Metrics
from voxclone.runtime.ratelimit import Decision, RateLimiter, RedisRateLimiter


def key_db_path(home: Path) -> Path:
    return Path(home) / "keys.sqlite3"


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant that owns voices and jobs, and what it may do."""

    owner: str
    scopes: frozenset[str]
    key_id: str | None  # None in single-user mode
    # This caller's speech goes out without the watermark: its key names the
    # speech:unmarked scope and the operator allows per-key marking.
    unmarked: bool = False

    def allows(self, scope: str) -> bool:
        return "admin" in self.scopes or scope in self.scopes

    @property
    def rate_limit_identity(self) -> str | None:
        return f"key:{self.key_id}" if self.key_id else None


LOCAL_PRINCIPAL = Principal(owner=LOCAL_OWNER, scopes=SCOPES - {SCOPE_UNMARKED}, key_id=None)


# How long "no key exists yet" is trusted before the key database is asked again.
# Asked on every request, the query was ~45 % of the event loop's time per request
# (py-spy of a 300-request burst: SQLAlchemy compile + SQLite round trip, twice per
# request: host guard and auth). A key made by `voxclone keys create` in another
# process therefore locks a running no-key server within this long.
KEYS_RECHECK_S = 1.0


class Authenticator:
    def __init__(
        self,
        keys: KeyStore,
        *,
        require_keys: bool = False,
        recheck_s: float = KEYS_RECHECK_S,
        watermark_per_key: bool = False,
    ) -> None:
        self.keys = keys
        self.require_keys = require_keys
        self.watermark_per_key = watermark_per_key
        self.recheck_s = recheck_s
        self._keys_seen = False
        self._none_until = 0.0  # monotonic time until which "no keys" is trusted

    def keys_active(self) -> bool:
        """True once any key was ever created, revoked or not.

        Revoking the last key must lock the server, not open it: otherwise
        revoking a leaked key would hand full rights to everyone.
        """
        if self.require_keys or self._keys_seen:
            return True
        now = time.monotonic()
        if now < self._none_until:
            return False
        # Keys are only ever revoked, never deleted, so once true this stays true.
        self._keys_seen = bool(self.keys.list(include_revoked=True))
        if not self._keys_seen:
            self._none_until = now + self.recheck_s
        return self._keys_seen

    def authenticate(self, authorization: str | None) -> Principal:
        if not self.keys_active():
            scheme, _, token = (authorization or "").partition(" ")
            if scheme.lower() == "bearer" and token.strip().startswith(KEY_PREFIX):
                raise Unauthorized(
                    "this server has no API keys, so the key sent is not one of its keys: "
                    "send no Authorization header, or create keys on this server with "
                    "'voxclone keys create'"
                )
            return LOCAL_PRINCIPAL
        if not authorization:
            raise Unauthorized(self._key_required())
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("use 'Authorization: Bearer <key>'")
        record = self.keys.authenticate(token.strip())
        if record is None:
            raise Unauthorized("the API key is not valid or has been revoked")
        unmarked = self.watermark_per_key and SCOPE_UNMARKED in record.scopes
        return Principal(
            owner=record.owner, scopes=record.scopes, key_id=record.id, unmarked=unmarked
        )

    def _key_required(self) -> str:
        message = "an API key is required: send 'Authorization: Bearer <key>'"
        if not self.require_keys and self.keys.count_active() == 0:
            message += (
                "; every key of this server has been revoked, so it refuses all API requests "
                "until a new one is created with 'voxclone keys create'"
            )
        return message


def authenticate_request(request: Request) -> Principal:
    authenticator: Authenticator = request.app.state.authenticator
    principal = authenticator.authenticate(request.headers.get("authorization"))
    request.state.owner = principal.owner  # for the access log
    # For X-Voxclone-Watermark (api/watermark_header.py): this answer is unmarked.
    request.state.unmarked = principal.unmarked
    return principal


def require(scope: str | None) -> Callable[[Request], Awaitable[Principal]]:
    """Dependency: authenticate, check ``scope`` (None: any valid key), then rate-limit."""

    async def dependency(request: Request) -> Principal:
        principal = authenticate_request(request)
        if scope is not None and not principal.allows(scope):
            raise Forbidden(f"this API key lacks the '{scope}' scope", field="scope", limit=scope)
        _take_token(request, principal)
        return principal

    return dependency


def require_any(*scopes: str) -> Callable[[Request], Awaitable[Principal]]:
    """Dependency: like :func:`require`, for a key with at least one of ``scopes``
    (the route then checks what the particular object needs)."""

    async def dependency(request: Request) -> Principal:
        principal = authenticate_request(request)
        if not any(principal.allows(scope) for scope in scopes):
            wanted = "' or '".join(scopes)
            raise Forbidden(
                f"this API key lacks the '{wanted}' scope", field="scope", limit=list(scopes)
            )
        _take_token(request, principal)
        return principal

    return dependency


def _take_token(request: Request, principal: Principal) -> None:
    """The rate limit, after authentication: one token for the key, else the address."""
    identity = principal.rate_limit_identity or _client_identity(request)
    enforce_rate_limit(
        request.app.state.rate_limiter,
        identity,
        request.app.state.metrics,
        request.scope.setdefault("state", {}),
    )


def _client_identity(request: Request) -> str:
    host = request.client.host if request.client else "unknown"
    return f"addr:{host}"


def rate_limiter_status(limiter: RateLimiter | None) -> dict[str, object]:
    """What /readyz and /metrics say about the limiter."""
    if limiter is None:
        return {"backend": "off"}
    if isinstance(limiter, RedisRateLimiter):
        return {
            "backend": "redis",
            "redis": "unreachable" if limiter.degraded else "ok",
            "without_redis": limiter.mode_without_redis,
            "decisions_without_redis": limiter.degraded_decisions,
        }
    return {"backend": "memory"}


# Where the route's decision waits for the response, in the request's state.
DECISION_STATE = "voxclone_rate_limit"


def enforce_rate_limit(
    limiter: RateLimiter | None,
    identity: str,
    metrics: Metrics | None = None,
    state: MutableMapping[str, Any] | None = None,
) -> None:
    """Take one token for ``identity`` or raise RateLimited (429 with Retry-After).

    ``state``: the request's scope state, where the decision is left for the
    headers of the response."""
    if limiter is None:
        return
    decision = limiter.check(identity)
    if state is not None:
        state[DECISION_STATE] = decision
    if decision.allowed:
        return
    if metrics is not None:
        metrics.rate_limited.inc()
    raise RateLimited(
        f"too many requests; retry in {decision.retry_after_s:.1f} s",
        retry_after=decision.retry_after_s,
    )


def rate_limit_headers(decision: Decision) -> list[tuple[bytes, bytes]]:
    """The X-RateLimit-* headers of ``decision``; none when its bucket is unknown."""
    if decision.limit <= 0:
        return []
    values = (
        ("x-ratelimit-limit", math.floor(decision.limit)),
        ("x-ratelimit-remaining", max(0, math.floor(decision.remaining))),
        ("x-ratelimit-reset", math.ceil(decision.reset_s)),
    )
    return [(name.encode(), str(value).encode()) for name, value in values]


class RateLimitHeadersMiddleware:
    """Add the X-RateLimit-* headers to the response of a request the limiter decided on.

    The decision is taken in the route's auth dependency; the response may
    come from the route, an error handler (429) or a guard outside it (the
    request deadline's 504), so the headers are added where every response
    passes: its start."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})

        async def send_with_headers(message: Any) -> None:
            decision = state.get(DECISION_STATE)
            if message["type"] == "http.response.start" and decision is not None:
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if not k.lower().startswith(b"x-ratelimit-")
                ]
                message = {**message, "headers": headers + rate_limit_headers(decision)}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# Annotated dependencies, one per scope, for route signatures.
TTSCaller = Annotated[Principal, Depends(require(SCOPE_TTS))]
VoiceReader = Annotated[Principal, Depends(require(SCOPE_VOICES_READ))]
VoiceWriter = Annotated[Principal, Depends(require(SCOPE_VOICES_WRITE))]
# Jobs: speech jobs belong to the tts scope, refinement jobs to the voices scopes.
JobCaller = Annotated[
    Principal, Depends(require_any(SCOPE_TTS, SCOPE_VOICES_READ, SCOPE_VOICES_WRITE))
]
AnyCaller = Annotated[Principal, Depends(require(None))]
