"""``/openapi.json`` is a document ReDoc and Swagger UI can render: every ``$ref``
points at something in it, and the main speech route's body has a real schema
and example (it referenced a ``TTSRequest`` schema the document lacked)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.api.docs import refs
from voxclone.config import Settings


def _spec(tmp_path: Path) -> dict[str, Any]:
    # No lifespan: the document needs no models.
    client = TestClient(create_app(Settings(home=tmp_path)), base_url="http://127.0.0.1")
    response = client.get("/openapi.json")
    assert response.status_code == 200
    spec: dict[str, Any] = response.json()
    return spec


def _resolve(spec: dict[str, Any], ref: str) -> Any:
    """The node a local JSON pointer (``#/a/b``) names, or KeyError."""
    assert ref.startswith("#/"), f"not a local reference: {ref}"
    node: Any = spec
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def test_every_ref_resolves(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    found = sorted(set(refs(spec)))
    assert "#/components/schemas/TTSRequest" in found
    dangling = []
    for ref in found:
        try:
            _resolve(spec, ref)
        except (KeyError, IndexError, ValueError):
            dangling.append(ref)
    assert dangling == []


def test_tts_body_has_its_fields_and_a_real_example(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    schema = spec["components"]["schemas"]["TTSRequest"]
    assert {"text", "voice", "stream", "ssml", "timestamps"} <= set(schema["properties"])
    assert schema["required"] == ["text"]
    body = spec["paths"]["/v1/tts"]["post"]["requestBody"]["content"]
    example = body["application/json"]["example"]
    assert isinstance(example, dict) and example["text"].strip()
    # The example is itself a valid request.
    from voxclone.api.schemas import TTSRequest

    TTSRequest.model_validate(example)
    # The form variant extends the same schema with the reference clip.
    form = body["multipart/form-data"]["schema"]
    assert form["allOf"] == [{"$ref": "#/components/schemas/TTSRequest"}]
    assert form["properties"]["reference"]["format"] == "binary"
