"""API docs (Swagger UI at ``/docs``, ReDoc at ``/redoc``) that work offline.

FastAPI's own pages load their scripts from a CDN, which a server without
internet cannot reach: the page stays blank. The same assets ship in the
``fastapi-offline`` package (MIT; Swagger UI is Apache-2.0, ReDoc MIT, see
NOTICE); we serve them from its package directory under ``/docs-assets``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_PATH = "/docs-assets"


def assets_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def install_offline_docs(app: FastAPI) -> None:
    """Add ``/docs`` and ``/redoc`` served from local assets (the app has none of its own)."""
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

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=title,
            redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
