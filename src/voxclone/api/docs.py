"""API docs (Swagger UI at ``/docs``, ReDoc at ``/redoc``) that work offline.

FastAPI's own pages load their scripts from a CDN, which a server without
internet cannot reach: the page stays blank. The same assets ship in the
``fastapi-offline`` package (MIT; Swagger UI is Apache-2.0, ReDoc MIT, see
NOTICE); we serve them from its package directory under ``/docs-assets``.

``/openapi.json`` is FastAPI's, completed here: a route that reads its own body
(``POST /v1/tts``: JSON or a form with a clip) declares it with a ``$ref`` to a
model FastAPI never saw, so that model's schema is added to the components
(ReDoc refuses a document with a dangling ``$ref``; Swagger UI shows resolver
errors), and a request body whose model has an example shows that example.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles

ASSETS_PATH = "/docs-assets"
REF_PREFIX = "#/components/schemas/"
# ReDoc's sidebar shows Redocly's logo from their CDN: the one request the
# docs made off the machine (a failed DNS lookup offline). The bundle is
# served with an empty inline image in its place.
REDOC_BUNDLE_PATH = "/redoc-assets/redoc.standalone.js"
_REDOC_REMOTE_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
_EMPTY_IMAGE = "data:image/svg+xml,%3Csvg xmlns=%27http://www.w3.org/2000/svg%27/%3E"


def _documented_models() -> dict[str, Any]:
    """Models that routes reference by ``$ref`` without taking them as a parameter."""
    from voxclone.api.schemas import TTSRequest

    return {model.__name__: model for model in (TTSRequest,)}


def refs(node: Any) -> Iterator[str]:
    """Every ``$ref`` string in an OpenAPI document (or part of one)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def complete_openapi(spec: dict[str, Any], models: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the component schemas its ``$ref``s name but lack (from
    ``models``, by name) and request-body examples from the models' schemas."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    missing = [ref[len(REF_PREFIX) :] for ref in refs(spec) if ref.startswith(REF_PREFIX)]
    for name in dict.fromkeys(missing):
        if name in schemas or name not in models:
            continue
        schema = models[name].model_json_schema(ref_template=REF_PREFIX + "{model}")
        for nested, definition in schema.pop("$defs", {}).items():
            schemas.setdefault(nested, definition)
        schemas[name] = schema
    for path in spec.get("paths", {}).values():
        for operation in path.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            for media in (body or {}).get("content", {}).values():
                ref = media.get("schema", {}).get("$ref", "")
                examples = schemas.get(ref[len(REF_PREFIX) :], {}).get("examples")
                if ref.startswith(REF_PREFIX) and examples and "example" not in media:
                    media["example"] = examples[0]
    return spec


def install_complete_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and so ``/openapi.json``) a document whose every
    ``$ref`` resolves."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete_openapi(generate(), _documented_models())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def assets_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def install_offline_docs(app: FastAPI) -> None:
    """Add ``/docs`` and ``/redoc`` served from local assets (the app has none of its own)."""
    install_complete_openapi(app)
    title = f"{app.title} — API docs"
    openapi_url = app.openapi_url or "/openapi.json"
    app.mount(ASSETS_PATH, StaticFiles(directory=assets_dir()), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
        )

    bundle: list[bytes] = []  # read on first use: ~1 MB nobody may ask for

    @app.get(REDOC_BUNDLE_PATH, include_in_schema=False)
    async def redoc_bundle() -> Response:
        if not bundle:
            text = (assets_dir() / "redoc.standalone.js").read_text(encoding="utf-8")
            bundle.append(text.replace(_REDOC_REMOTE_LOGO, _EMPTY_IMAGE).encode("utf-8"))
        return Response(
            bundle[0],
            media_type="application/javascript",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=title,
            redoc_js_url=REDOC_BUNDLE_PATH,
            redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
