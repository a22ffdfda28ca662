"""Regression corpus of issue 37's content-type family: no body gets past the guard.

The probe sent JSON as ``application/jsonx``, ``json-seq``, ``json5`` and
``jsonp`` (``/v1/tts`` parsed them unchecked: a lone surrogate or 3,000
nested brackets ended in a 500), two ``Content-Type`` headers (json, then
text/plain: 500 on four routes, and a speech job accepted that then failed
three times), a foreign Host followed by a loopback one (served), and 16.8 MB
``<speak>`` documents (413 only after parsing). Every answer here must be a
4xx with the JSON error body, never a 5xx.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from voxclone.api.body_guard import (
    CHECKED_KINDS,
    FORM_KINDS,
    BodyGuardMiddleware,
    MediaKind,
    media_kind,
    route_media,
    text_body_limit,
)

JSONISH_TYPES = (
    "application/jsonx",
    "application/json-seq",
    "application/json5",
    "application/jsonp",
)
DEEP = "[" * 3000 + "]" * 3000
# One body per route the probe hit, each carrying a lone surrogate (\ud800).
SURROGATE_BODIES = {
    "/v1/tts": '{"text": "a\\ud800b"}',
    "/v1/audio/speech": '{"model": "tts-1", "input": "a\\ud800b", "voice": "alloy"}',
    "/v1/audio/speech/captioned": '{"input": "a\\ud800b"}',
    "/v1/voices/blend": '{"name": "a\\ud800b", "blend": "clear_male(1)+clear_female(1)"}',
    "/v1/jobs/speech": '{"text": "a\\ud800b"}',
}
ROUTES = tuple(SURROGATE_BODIES)


def _error(r: Any, status: int, field: str | None = None) -> dict[str, Any]:
    """The answer is ``status`` (a 4xx) with the JSON error body naming ``field``."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    err: dict[str, Any] = r.json()["error"]
    assert err["code"] and err["message"]
    if field is not None:
        assert err.get("field") == field, err
    return err


@pytest.fixture()
def app(make_app: Any) -> FastAPI:
    # No render is wanted here: queued jobs stay queued, and no rate limit.
    return make_app(rate_limit_per_minute=0, job_worker=False)


@pytest.fixture()
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("content_type", JSONISH_TYPES)
@pytest.mark.parametrize("payload", ["surrogate", "deep"])
def test_jsonish_types_are_415_on_every_json_route(
    client: TestClient, path: str, content_type: str, payload: str
) -> None:
    body = SURROGATE_BODIES[path] if payload == "surrogate" else DEEP
    r = client.post(path, content=body.encode(), headers={"Content-Type": content_type})
    err = _error(r, 415, field="content-type")
    assert "application/json" in err["limit"]
    assert content_type in err["message"]


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("content_type", ["application/vnd.voxclone+json", None, "text/plain"])
def test_plus_json_and_missing_types_are_415(
    client: TestClient, path: str, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    r = client.post(path, content=SURROGATE_BODIES[path].encode(), headers=headers)
    _error(r, 415, field="content-type")


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize(
    "types",
    [("application/json", "text/plain"), ("text/plain", "application/json")],
)
def test_two_content_type_headers_are_400(
    client: TestClient, path: str, types: tuple[str, str]
) -> None:
    headers = [("Content-Type", types[0]), ("Content-Type", types[1])]
    r = client.post(path, content=SURROGATE_BODIES[path].encode(), headers=headers)
    _error(r, 400, field="content-type")


@pytest.mark.parametrize("path", ["/v1/tts", "/v1/audio/speech"])
def test_json_with_parameters_is_still_checked(client: TestClient, path: str) -> None:
    headers = {"Content-Type": "Application/JSON; charset=utf-8"}
    err = _error(client.post(path, content=SURROGATE_BODIES[path].encode(), headers=headers), 400)
    assert "surrogate" in err["message"]
    _error(client.post(path, content=DEEP.encode(), headers=headers), 400)


def test_a_refused_job_body_creates_no_job(app: FastAPI, runtime: Any) -> None:
    owner = "hostile-content-types"
    key, _ = app.state.keys.create("test", {"tts"}, owner=owner)
    auth = ("Authorization", f"Bearer {key}")
    assert runtime.jobs is not None
    with TestClient(app) as c:
        body = SURROGATE_BODIES["/v1/jobs/speech"].encode()
        for headers in (
            [auth, ("Content-Type", "application/json"), ("Content-Type", "text/plain")],
            [auth, ("Content-Type", "application/jsonx")],
            [auth, ("Content-Type", "application/json")],
        ):
            r = c.post("/v1/jobs/speech", content=body, headers=headers)
            assert 400 <= r.status_code < 500, (r.status_code, r.text[:200])
        assert runtime.jobs.list(owner) == []
        # The store is where a job would show: a valid body makes one.
        ok = c.post("/v1/jobs/speech", json={"text": "Hello."}, headers=[auth])
        assert ok.status_code == 202, ok.text
        assert [job.id for job in runtime.jobs.list(owner)] == [ok.json()["id"]]
        assert c.delete(f"/v1/jobs/{ok.json()['id']}", headers=[auth]).status_code == 200


@pytest.mark.parametrize(
    "hosts", [("evil.example", "127.0.0.1"), ("127.0.0.1", "evil.example"), ("localhost",) * 2]
)
def test_two_host_headers_are_400(make_app: Any, hosts: tuple[str, str]) -> None:
    with TestClient(make_app(allowed_hosts=[]), base_url="http://127.0.0.1:8000") as c:
        r = c.get("/v1/voices", headers=[("Host", hosts[0]), ("Host", hosts[1])])
        _error(r, 400, field="host")
        assert c.get("/v1/voices", headers={"Host": "127.0.0.1"}).status_code == 200


def test_host_guard_alone_refuses_two_hosts() -> None:
    from voxclone.api.host_guard import HostGuardMiddleware

    guard = HostGuardMiddleware(None, keys_active=lambda: False)
    one = {"type": "http", "method": "GET", "headers": [(b"host", b"127.0.0.1")]}
    two = {**one, "headers": [(b"host", b"evil.example"), (b"host", b"127.0.0.1")]}
    assert guard.refusal(one) is None
    assert guard.refusal(two) is not None


def test_oversized_json_is_413_naming_the_text_body_limit(client: TestClient) -> None:
    limit = text_body_limit(100_000)
    assert limit == 12 * 100_000 + 64 * 1024
    # The probe's document: a 16.8 MB <speak> text, under the 20 MB upload limit.
    speak = "<speak>" + "<s>x</s>" * 2_100_000 + "</speak>"
    bodies = {
        "/v1/tts": {"text": speak},
        "/v1/jobs/speech": {"text": speak},
        "/v1/audio/speech": {"model": "tts-1", "input": speak, "voice": "alloy"},
    }
    for path, fields in bodies.items():
        body = json.dumps(fields).encode()
        assert len(body) > 16_000_000
        r = client.post(path, content=body, headers={"Content-Type": "application/json"})
        err = _error(r, 413, field="body")
        assert err["limit"] == limit
    form = urlencode({"text": "x" * (limit + 1)})
    r = client.post(
        "/v1/tts",
        content=form.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert _error(r, 413, field="body")["limit"] == limit


def test_text_body_limit_follows_max_text_chars(make_app: Any) -> None:
    with TestClient(make_app(max_text_chars=1_000, rate_limit_per_minute=0)) as c:
        over = json.dumps({"text": "a" * (text_body_limit(1_000) + 1)}).encode()
        r = c.post("/v1/tts", content=over, headers={"Content-Type": "application/json"})
        assert _error(r, 413, field="body")["limit"] == 12 * 1_000 + 64 * 1024


@pytest.mark.parametrize("n", [1, 1_000, 100_000])
def test_the_longest_valid_text_fits_the_limit(n: int) -> None:
    # Worst cases a valid request can send: every character outside the BMP,
    # escaped by JSON as a surrogate pair or percent-encoded in a form.
    text = "\U0001f600" * n
    assert len(json.dumps({"text": text, "voice": "x" * 200})) <= text_body_limit(n)
    assert len(urlencode({"text": text, "voice": "x" * 200})) <= text_body_limit(n)


def test_a_streamed_json_body_is_cut_off_before_any_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ASGI level: chunks are pulled only up to the limit; nothing parses them."""
    import anyio

    import voxclone.api.body_guard as body_guard

    def no_parse(raw: bytes) -> None:
        raise AssertionError("an oversized body was parsed")

    monkeypatch.setattr(body_guard, "check_json", no_parse)

    async def route(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("an oversized body reached the route")

    limit = 1_000_000
    chunk = b"[" * 65_536
    pulled = 0

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": chunk, "more_body": pulled < 1_000}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    guard = BodyGuardMiddleware(route, routes=[], text_body_bytes=limit)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/tts",
        "headers": [(b"content-type", b"application/json")],  # no length: chunked
    }
    anyio.run(guard, scope, receive, send)
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["error"]["limit"] == limit
    assert pulled == limit // len(chunk) + 1  # 16 chunks of 1,000 on offer


def test_declared_length_over_the_limit_is_refused_unread() -> None:
    import anyio

    async def route(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("reached the route")

    async def receive() -> dict[str, Any]:
        raise AssertionError("the body was read")

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    guard = BodyGuardMiddleware(route, routes=[], text_body_bytes=100)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"101")]
    anyio.run(
        guard, {"type": "http", "method": "POST", "path": "/", "headers": headers}, receive, send
    )
    assert sent[0]["status"] == 413


def test_each_route_accepts_only_its_own_kinds(client: TestClient) -> None:
    # Form fields to a JSON route, JSON to an upload route: 415 naming what fits.
    r = client.post("/v1/audio/speech", data={"model": "tts-1", "input": "Hi.", "voice": "alloy"})
    assert _error(r, 415, field="content-type")["limit"] == ["application/json"]
    r = client.post("/v1/voices", json={"name": "x"})
    assert _error(r, 415, field="content-type")["limit"] == [
        "multipart/form-data",
        "application/x-www-form-urlencoded",
    ]
    # A route without a body takes nothing unchecked; an empty request passes on.
    r = client.post(
        "/v1/jobs/j_missing/cancel", content=b"x", headers={"Content-Type": "text/plain"}
    )
    _error(r, 415, field="content-type")
    _error(client.post("/v1/jobs/j_missing/cancel"), 404)
    # What the routes read still works: a form and JSON to /v1/tts.
    assert client.post("/v1/tts", data={"text": "Hi."}).status_code == 200
    assert client.post("/v1/tts", json={"text": "Hi."}).status_code == 200


def test_route_table_matches_what_routes_read(app: FastAPI) -> None:
    """Every route that reads a body declares a kind; the ones the probe hit read JSON."""
    from fastapi.routing import APIRoute

    from voxclone.api import routes_captions, routes_jobs, routes_openai, routes_tts, routes_voices

    kinds: dict[tuple[str, str], frozenset[MediaKind]] = {}
    for module in (routes_tts, routes_openai, routes_captions, routes_voices, routes_jobs):
        for route in module.router.routes:
            assert isinstance(route, APIRoute) and route.methods is not None
            for method in route.methods:
                kinds[(method, route.path)] = route_media(route)
    assert kinds[("POST", "/v1/tts")] == CHECKED_KINDS
    assert kinds[("POST", "/v1/voices")] == FORM_KINDS
    for path in ROUTES[1:]:
        assert kinds[("POST", path)] == {MediaKind.JSON}, path
    assert kinds[("POST", "/v1/jobs/{job_id}/cancel")] == frozenset()


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, MediaKind.ABSENT),
        ("", MediaKind.ABSENT),
        ("application/json", MediaKind.JSON),
        (" APPLICATION/JSON ; charset=utf-8", MediaKind.JSON),
        ("application/jsonx", MediaKind.OTHER),
        ("application/json-seq", MediaKind.OTHER),
        ("application/vnd.api+json", MediaKind.OTHER),
        ("application/json, text/plain", MediaKind.OTHER),
        ("multipart/form-data; boundary=x", MediaKind.MULTIPART),
        ("multipart/form-dataX; boundary=x", MediaKind.OTHER),
        ("application/x-www-form-urlencoded", MediaKind.URLENCODED),
    ],
)
def test_media_kind(value: str | None, kind: MediaKind) -> None:
    assert media_kind(value) is kind
