"""Every malformed input is a 4xx with the JSON error body, on every JSON and form route.

Issue 18, finding 5: non-finite numbers, lone surrogates, deep nesting and
booleans where numbers belong used to end in 500s (or were accepted).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

NUMBER_FIELDS = ("speed", "pitch", "energy", "intensity")
NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e400", "-1e400")


def _assert_client_error(r: Any, *, field: str | None = None) -> dict[str, Any]:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    err = r.json()["error"]
    assert err["code"] and err["message"]
    if field is not None:
        assert err.get("field") == field, err
    return err


def _raw_json(c: TestClient, path: str, body: str, method: str = "POST") -> Any:
    return c.request(
        method, path, content=body.encode(), headers={"Content-Type": "application/json"}
    )


@pytest.mark.parametrize("field", NUMBER_FIELDS)
@pytest.mark.parametrize("literal", NON_FINITE)
def test_non_finite_numbers_in_tts_json_are_400(
    client: TestClient, field: str, literal: str
) -> None:
    r = _raw_json(client, "/v1/tts", f'{{"text": "Hello.", "{field}": {literal}}}')
    _assert_client_error(r, field=field)


@pytest.mark.parametrize("literal", NON_FINITE)
def test_non_finite_speed_on_openai_route_is_400(client: TestClient, literal: str) -> None:
    body = f'{{"model": "tts-1", "input": "Hello.", "voice": "alloy", "speed": {literal}}}'
    _assert_client_error(_raw_json(client, "/v1/audio/speech", body), field="speed")


@pytest.mark.parametrize("field", NUMBER_FIELDS)
@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", "1e400"])
def test_non_finite_numbers_in_tts_form_are_4xx(client: TestClient, field: str, value: str) -> None:
    r = client.post("/v1/tts", data={"text": "Hello.", field: value})
    _assert_client_error(r, field=field)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/tts", '{"text": "a\\ud800b"}', "text"),
        ("/v1/tts", '{"text": "Hello.", "voice": "\\udfff"}', "voice"),
        ("/v1/tts", '{"text": "Hello.", "language": "\\ud800"}', "language"),
        ("/v1/tts", '{"text": "Hello.", "\\ud800": 1}', "body"),
        ("/v1/audio/speech", '{"model": "tts-1", "input": "\\ud800", "voice": "alloy"}', "input"),
        ("/v1/audio/speech", '{"model": "tts-1", "input": "Hi.", "voice": "\\ud800"}', "voice"),
    ],
)
def test_lone_surrogates_are_400_naming_the_field(
    client: TestClient, path: str, body: str, field: str
) -> None:
    err = _assert_client_error(_raw_json(client, path, body), field=field)
    assert "surrogate" in err["message"]


def test_lone_surrogate_in_voice_name_is_400(client: TestClient) -> None:
    r = _raw_json(client, "/v1/voices/v_missing", '{"name": "\\ud800"}', method="PATCH")
    _assert_client_error(r, field="name")


@pytest.mark.parametrize("path", ["/v1/tts", "/v1/audio/speech", "/v1/voices/v_x/refine"])
def test_deeply_nested_json_is_400(client: TestClient, path: str) -> None:
    depth = 3000
    r = _raw_json(client, path, "[" * depth + "]" * depth)
    _assert_client_error(r)
    assert r.status_code == 400
    nested = '{"text": "Hello.", "voice": ' + "[" * depth + "]" * depth + "}"
    assert _raw_json(client, path, nested).status_code == 400


@pytest.mark.parametrize("field", NUMBER_FIELDS)
def test_booleans_are_not_numbers(client: TestClient, field: str) -> None:
    r = client.post("/v1/tts", json={"text": "Hello.", field: True})
    _assert_client_error(r, field=field)


def test_boolean_sample_rate_and_openai_speed_are_refused(client: TestClient) -> None:
    _assert_client_error(
        client.post("/v1/tts", json={"text": "Hello.", "sample_rate": True}), field="sample_rate"
    )
    r = client.post(
        "/v1/audio/speech",
        json={"model": "tts-1", "input": "Hello.", "voice": "alloy", "speed": True},
    )
    _assert_client_error(r, field="speed")


def test_invalid_utf8_in_form_fields_is_not_a_500(client: TestClient) -> None:
    # An encoded surrogate (CESU-8) and a stray continuation byte in a form.
    for raw in (b"\xed\xa0\x80", b"\x80abc"):
        body = (
            b'--B\r\nContent-Disposition: form-data; name="text"\r\n\r\n'
            + raw
            + b'\r\n--B\r\nContent-Disposition: form-data; name="voice"\r\n\r\n'
            + raw
            + b"\r\n--B--\r\n"
        )
        r = client.post(
            "/v1/tts", content=body, headers={"Content-Type": "multipart/form-data; boundary=B"}
        )
        assert r.status_code < 500, r.text[:300]
        r = client.post(
            "/v1/voices",
            content=body.replace(b'name="text"', b'name="name"'),
            headers={"Content-Type": "multipart/form-data; boundary=B"},
        )
        assert r.status_code < 500, r.text[:300]


def test_well_formed_requests_still_pass_the_guard(client: TestClient) -> None:
    r = client.post("/v1/tts", json={"text": "Hi.", "speed": 1.2, "intensity": 1})
    assert r.status_code == 200, r.text
    assert r.content[:4] == b"RIFF"


def test_check_json_bounds() -> None:
    from voxclone.api.input_guard import MAX_JSON_DEPTH, UnsafeJSON, check_json

    check_json(b'{"a": [1, 2.5, "x"]}')
    check_json(b"not json at all")  # left to the route's own parser
    deep_ok = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
    check_json(deep_ok.encode())
    for bad in (
        "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
        '{"a": NaN}',
        '{"a": [1e999]}',
        '["\\ud800"]',
    ):
        with pytest.raises(UnsafeJSON):
            check_json(bad.encode())


@pytest.mark.parametrize(
    "path",
    ["/v1/voices/%ED%A0%80", "/v1/jobs/%ED%A0%80", "/v1/voices/%F0%28%8C%BC", "/v1/jobs/%00"],
)
def test_invalid_utf8_in_path_ids_is_404_not_500(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 404, (r.status_code, r.text[:200])
    assert r.json()["error"]["code"] == "not_found"
