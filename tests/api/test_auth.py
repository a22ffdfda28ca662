"""API keys, scopes, tenancy and rate limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_voices import FakeJobView, FakeVoiceService
from fastapi import FastAPI
from fastapi.testclient import TestClient

from voxclone.runtime.job_store import JobEvents


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture()
def keyed_app(make_app: Any) -> FastAPI:
    return make_app()


def _key(app: FastAPI, *scopes: str, owner: str | None = None) -> str:
    plaintext, _ = app.state.keys.create("test", set(scopes), owner=owner)
    return str(plaintext)


def test_no_keys_means_local_owner_with_all_scopes(client: TestClient) -> None:
    info = client.get("/v1/info").json()
    assert info["owner"] == "local"
    assert set(info["scopes"]) == {"tts", "voices:read", "voices:write", "admin"}
    assert client.get("/metrics").status_code == 200


def test_missing_wrong_and_revoked_keys_are_401(keyed_app: FastAPI) -> None:
    key = _key(keyed_app, "tts")
    with TestClient(keyed_app) as c:
        missing = c.post("/v1/tts", json={"text": "hi"})
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "unauthorized"
        wrong = c.post("/v1/tts", json={"text": "hi"}, headers=_bearer("vox_" + "A" * 32))
        assert wrong.status_code == 401
        assert c.get("/v1/models", headers={"Authorization": f"Basic {key}"}).status_code == 401
        assert c.get("/v1/models", headers=_bearer(key)).status_code == 200
        record = keyed_app.state.keys.list()[0]
        keyed_app.state.keys.revoke(record.id)
        assert c.get("/v1/models", headers=_bearer(key)).status_code == 401


def test_public_endpoints_need_no_key(keyed_app: FastAPI) -> None:
    _key(keyed_app, "tts")
    with TestClient(keyed_app) as c:
        assert c.get("/healthz").status_code == 200
        assert c.get("/readyz").status_code == 200
        assert c.get("/openapi.json").status_code == 200


def test_wrong_scope_is_403(keyed_app: FastAPI) -> None:
    reader = _key(keyed_app, "voices:read")
    with TestClient(keyed_app) as c:
        r = c.post("/v1/tts", json={"text": "hi"}, headers=_bearer(reader))
        assert r.status_code == 403
        assert r.json()["error"]["code"] == "forbidden"
        assert c.get("/metrics", headers=_bearer(reader)).status_code == 403
        admin = _key(keyed_app, "admin")
        assert c.get("/metrics", headers=_bearer(admin)).status_code == 200
        assert c.get("/metrics").status_code == 401


@pytest.fixture()
def fake(runtime: Any, app_runtime: Any) -> Iterator[FakeVoiceService]:
    service = FakeVoiceService(runtime.catalog, JobEvents())
    app_runtime.replace(voices=service, jobs=FakeJobView(service))
    yield service


def test_other_tenants_voice_is_404(keyed_app: FastAPI, fake: FakeVoiceService) -> None:
    alice = _key(keyed_app, "voices:read", "voices:write", "tts", owner="alice")
    bob = _key(keyed_app, "voices:read", "voices:write", "tts", owner="bob")
    with TestClient(keyed_app) as c:
        created = c.post(
            "/v1/voices",
            data={"name": "A", "consent": "true", "consent_statement": "I agree."},
            files={"audio": ("a.wav", b"RIFF" + b"\0" * 100, "audio/wav")},
            headers=_bearer(alice),
        )
        assert created.status_code == 201, created.text
        voice_id = created.json()["id"]
        assert fake.enrolled[-1].owner == "alice"
        assert c.get(f"/v1/voices/{voice_id}", headers=_bearer(alice)).status_code == 200
        for method in ("GET", "DELETE"):
            r = c.request(method, f"/v1/voices/{voice_id}", headers=_bearer(bob))
            assert r.status_code == 404
        assert c.get("/v1/voices", headers=_bearer(bob)).json() == {"voices": []}


def test_empty_bucket_is_429_with_retry_after(make_app: Any) -> None:
    app = make_app(rate_limit_per_minute=6, rate_limit_burst=2)
    key = _key(app, "tts")
    other = _key(app, "tts")
    with TestClient(app) as c:
        codes = [c.get("/v1/models", headers=_bearer(key)).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        r = c.get("/v1/models", headers=_bearer(key))
        assert r.status_code == 429
        assert 1 <= int(r.headers["retry-after"]) <= 10
        assert r.json()["error"]["code"] == "rate_limited"
        # Buckets are per key: another key is unaffected.
        assert c.get("/v1/models", headers=_bearer(other)).status_code == 200
        # Liveness is never rate limited.
        assert all(c.get("/healthz").status_code == 200 for _ in range(5))


def test_anonymous_callers_are_limited_per_address(make_app: Any) -> None:
    app = make_app(rate_limit_per_minute=6, rate_limit_burst=1)
    with TestClient(app) as c:
        assert c.get("/v1/models").status_code == 200
        assert c.get("/v1/models").status_code == 429


def test_a_key_made_by_another_process_locks_a_no_key_server_within_the_recheck(
    tmp_path: Any,
) -> None:
    """A cached "no keys yet" (the per-request query was ~45 % of a refusal's time)
    holds only for ``recheck_s``: a key made by the CLI must lock the server."""
    from voxclone.api.auth import Authenticator
    from voxclone.runtime.keys import KeyStore

    db = tmp_path / "keys.sqlite3"
    clock = [100.0]
    server_side = Authenticator(KeyStore(db), recheck_s=1.0)
    import voxclone.api.auth as auth_module

    real_monotonic = auth_module.time.monotonic
    auth_module.time.monotonic = lambda: clock[0]  # type: ignore[assignment]
    try:
        assert not server_side.keys_active()
        KeyStore(db).create("cli", {"tts"})  # `voxclone keys create`, another process
        clock[0] += 0.5
        assert not server_side.keys_active()  # still inside the recheck window
        clock[0] += 0.6
        assert server_side.keys_active()
        clock[0] += 100.0
        assert server_side.keys_active()  # keys are never deleted: it stays locked
    finally:
        auth_module.time.monotonic = real_monotonic  # type: ignore[assignment]


def test_request_dependencies_run_on_the_event_loop() -> None:
    """A plain ``def`` dependency is run in the thread pool: under load that hop cost
    10-20 ms per request (strace of a 40-client burst), so the shared ones are async."""
    import inspect
    import typing

    from voxclone.api.auth import TTSCaller
    from voxclone.api.deps import RuntimeDep

    for annotated in (RuntimeDep, TTSCaller):
        depends = typing.get_args(annotated)[1]
        assert inspect.iscoroutinefunction(depends.dependency), depends
