"""One JSON error shape for every failure; request ids; readiness while loading."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import voxclone.bootstrap
from voxclone.api.app import create_app
from voxclone.config import Settings


def _assert_shape(body: dict[str, Any], code: str) -> None:
    assert list(body) == ["error"]
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def test_unknown_route_is_json_404(client: TestClient) -> None:
    r = client.get("/v1/nothing-here")
    assert r.status_code == 404
    _assert_shape(r.json(), "not_found")


def test_wrong_method_is_json_405(client: TestClient) -> None:
    r = client.get("/v1/tts")
    assert r.status_code == 405
    _assert_shape(r.json(), "method_not_allowed")


def test_malformed_json_is_422(client: TestClient) -> None:
    r = client.post("/v1/tts", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    _assert_shape(r.json(), "invalid_input")


def test_declared_oversized_body_is_413_before_reading(make_app: Any) -> None:
    with TestClient(make_app(max_upload_mb=0.01)) as c:
        r = c.post("/v1/tts", content=b"x" * 20_000, headers={"content-type": "application/json"})
    assert r.status_code == 413
    _assert_shape(r.json(), "payload_too_large")
    assert r.json()["error"]["limit"] == int(0.01 * (1 << 20))


def test_streamed_oversized_body_is_cut_off_with_413(make_app: Any) -> None:
    sent = 0

    def chunks() -> Any:
        nonlocal sent
        for _ in range(100):  # 100 x 1 KiB against a 10 KiB limit, no Content-Length
            sent += 1
            yield b"x" * 1024

    with TestClient(make_app(max_upload_mb=0.01)) as c:
        r = c.post(
            "/v1/voices",
            content=chunks(),
            headers={"content-type": "multipart/form-data; boundary=zzz"},
        )
    assert r.status_code == 413
    _assert_shape(r.json(), "payload_too_large")


def test_unexpected_error_is_500_without_internals(
    client: TestClient, runtime: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom in /srv/secret/path.py")

    monkeypatch.setattr(runtime.speech, "synthesize", broken)
    r = client.post("/v1/tts", json={"text": "hi"}, headers={"X-Request-ID": "trace-500"})
    assert r.status_code == 500
    _assert_shape(r.json(), "internal_error")
    assert "secret" not in r.text and "Traceback" not in r.text and "boom" not in r.text
    assert "trace-500" in r.json()["error"]["message"]
    assert r.headers["x-request-id"] == "trace-500"
    assert any("boom" in (rec.exc_text or "") or rec.exc_info for rec in caplog.records)


def test_request_id_is_echoed_or_generated(client: TestClient) -> None:
    r = client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    generated = client.get("/healthz").headers["x-request-id"]
    assert len(generated) >= 16 and generated != "abc-123"
    # Junk that could forge log lines is replaced, not echoed.
    forged = client.get("/healthz", headers={"X-Request-ID": "a b\tc"}).headers["x-request-id"]
    assert forged != "a b\tc"


def test_access_log_has_route_status_and_no_text(client: TestClient, caplog: Any) -> None:
    caplog.set_level("INFO", logger="voxclone.access")
    client.post("/v1/tts", json={"text": "a very private sentence", "voice": "nobody"})
    entries = [getattr(r, "fields", {}) for r in caplog.records if r.name == "voxclone.access"]
    entry = entries[-1]
    assert entry["route"] == "/v1/tts" and entry["status"] == 404
    assert entry["latency_ms"] >= 0 and entry["request_id"]
    assert all("private" not in r.getMessage() for r in caplog.records)


def test_metrics_count_requests_by_route(client: TestClient) -> None:
    client.get("/healthz")
    text = client.get("/metrics").text
    assert 'voxclone_http_requests_total{method="GET",route="/healthz",status="200"}' in text


def test_healthz_answers_while_models_load_and_readyz_waits(
    tmp_path: Path, runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def slow_build(settings: Settings, **kwargs: Any) -> Any:
        release.wait(10)
        return runtime

    monkeypatch.setattr(voxclone.bootstrap, "build_runtime", slow_build)
    app = create_app(Settings(home=tmp_path))
    app.state  # noqa: B018 - the app exists before the runtime does
    with TestClient(app, base_url="http://127.0.0.1") as c:
        assert c.get("/healthz").status_code == 200
        not_ready = c.get("/readyz")
        assert not_ready.status_code == 503
        assert "retry-after" in not_ready.headers
        _assert_shape(not_ready.json(), "not_ready")
        assert c.post("/v1/tts", json={"text": "hi"}).status_code == 503
        release.set()
        for _ in range(100):
            if c.get("/readyz").status_code == 200:
                break
            threading.Event().wait(0.05)
        assert c.get("/readyz").json()["status"] == "ready"
        # Built by the app, so the app closes it at shutdown: keep the shared one open.
        app.state.owned_runtime = None


def test_info_lists_languages_formats_and_limits(client: TestClient) -> None:
    info = client.get("/v1/info").json()
    assert "en-us" in info["languages"]
    assert {"wav", "mp3", "opus", "flac", "pcm"} <= set(info["formats"])
    assert info["limits"]["max_text_chars"] > 0
    assert "clear_female" in info["builtin_voices"]
