"""Host and Origin checks (issue 18, finding 4): DNS rebinding and cross-site requests.

The apps here are built with an empty Host allow-list, as an operator's
default, so TestClient talks to them under loopback base URLs.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

LOOPBACK = "http://127.0.0.1:8000"


@pytest.fixture()
def local(make_app: Any) -> Any:
    with TestClient(make_app(allowed_hosts=[]), base_url=LOOPBACK) as c:
        yield c


def _refused(r: Any) -> None:
    assert r.status_code == 403, (r.status_code, r.text[:200])
    assert r.json()["error"]["code"] == "forbidden_host"


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:8000", "127.0.0.1", "127.1.2.3:9", "localhost", "LOCALHOST:8000", "[::1]:8000"],
)
def test_loopback_hosts_are_served_without_keys(local: TestClient, host: str) -> None:
    assert local.get("/v1/voices", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example.com", "evil.example.com:8000", "10.0.0.5:8000", "127.0.0.1.evil.com", ""]
)
def test_dns_rebinding_host_is_refused_without_keys(local: TestClient, host: str) -> None:
    _refused(local.get("/v1/voices", headers={"Host": host}))
    _refused(local.post("/v1/tts", json={"text": "Hi."}, headers={"Host": host}))


def test_health_probes_answer_any_host(local: TestClient) -> None:
    assert local.get("/healthz", headers={"Host": "10.1.2.3:8000"}).status_code == 200


def test_cross_site_posts_are_refused_without_keys(local: TestClient) -> None:
    # A form on another site posting to the loopback server.
    _refused(
        local.post(
            "/v1/tts",
            data={"text": "Hi."},
            headers={"Origin": "https://evil.example.com", "Sec-Fetch-Site": "cross-site"},
        )
    )
    # The same without an Origin header, only the fetch metadata.
    _refused(local.post("/v1/tts", data={"text": "Hi."}, headers={"Sec-Fetch-Site": "cross-site"}))
    # Another port on localhost is another origin.
    _refused(local.delete("/v1/voices/v_x", headers={"Origin": "http://localhost:3000"}))
    _refused(local.get("/v1/voices", headers={"Origin": "null"}))


def test_same_origin_browser_requests_pass(local: TestClient) -> None:
    headers = {"Origin": LOOPBACK, "Sec-Fetch-Site": "same-origin"}
    r = local.post("/v1/tts", json={"text": "Hi."}, headers=headers)
    assert r.status_code == 200, r.text
    assert local.get("/", headers={"Sec-Fetch-Site": "none"}).status_code == 200
    # A cross-site GET (a link, an image) is not state-changing: answered.
    assert local.get("/healthz", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 200


def test_allowed_origins_and_cors_origins_are_honoured(make_app: Any) -> None:
    app = make_app(
        allowed_hosts=[],
        allowed_origins=["https://studio.example.com"],
        cors_origins=["http://localhost:3000"],
    )
    with TestClient(app, base_url=LOOPBACK) as c:
        for origin in ("https://studio.example.com", "http://localhost:3000"):
            r = c.get("/v1/voices", headers={"Origin": origin, "Sec-Fetch-Site": "cross-site"})
            assert r.status_code == 200, r.text
        _refused(c.get("/v1/voices", headers={"Origin": "https://other.example.com"}))


def _key(app: Any) -> str:
    return str(app.state.keys.create("test", {"tts"}, owner="tenant")[0])


def test_with_keys_any_host_unless_an_allow_list_is_set(make_app: Any) -> None:
    app = make_app(allowed_hosts=[])
    auth = {"Authorization": f"Bearer {_key(app)}"}
    with TestClient(app, base_url="http://api.example.com") as c:
        assert c.get("/v1/audio/voices", headers=auth).status_code == 200
        assert c.get("/v1/audio/voices").status_code == 401  # the key is the gate

    app = make_app(allowed_hosts=["api.example.com", ".corp.example"])
    auth = {"Authorization": f"Bearer {_key(app)}"}
    with TestClient(app, base_url="http://api.example.com") as c:
        assert c.get("/v1/audio/voices", headers=auth).status_code == 200
        ok = c.get("/v1/audio/voices", headers={**auth, "Host": "tts.corp.example:443"})
        assert ok.status_code == 200
        _refused(c.get("/v1/audio/voices", headers={**auth, "Host": "evil.example.com"}))


def test_host_parsing() -> None:
    from voxclone.api.host_guard import is_loopback_host, split_host

    assert split_host("Example.COM:8080") == ("example.com", 8080)
    assert split_host("[::1]:80") == ("::1", 80)
    assert split_host("::1") is None
    assert split_host("host:99999") is None
    assert split_host("host:abc") is None
    assert is_loopback_host("127.9.9.9") and is_loopback_host("::1")
    assert is_loopback_host("localhost.") and not is_loopback_host("localhost.evil.com")
    assert not is_loopback_host("0.0.0.0")
