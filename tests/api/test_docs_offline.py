"""``/docs`` and ``/redoc`` load nothing from the internet (the server may be offline)."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from voxclone.api.app import create_app
from voxclone.config import Settings

_URL_IN_PAGE = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url:\s*["']([^"']+)["']""")


def _client(tmp_path: Path) -> TestClient:
    # No lifespan (no `with`): the docs pages need no models.
    return TestClient(create_app(Settings(home=tmp_path)), base_url="http://127.0.0.1")


def test_docs_pages_reference_only_local_assets(tmp_path: Path) -> None:
    client = _client(tmp_path)
    for page in ("/docs", "/redoc"):
        response = client.get(page)
        assert response.status_code == 200, page
        urls = [a or b for a, b in _URL_IN_PAGE.findall(response.text)]
        assert urls, f"{page}: no asset found in the page"
        remote = [u for u in urls if re.match(r"^(https?:)?//", u)]
        assert remote == [], f"{page} loads from the network: {remote}"
        for url in urls:
            asset = client.get(url)
            assert asset.status_code == 200, f"{page}: {url} -> {asset.status_code}"
            assert len(asset.content) > 0


def test_docs_assets_do_not_shadow_the_ui_or_api(tmp_path: Path) -> None:
    client = _client(tmp_path)
    assert (
        client.get("/docs-assets/swagger-ui-bundle.js")
        .headers["content-type"]
        .startswith(("application/javascript", "text/javascript"))
    )
    assert client.get("/docs-assets/nothing-here.js").status_code == 404
    assert "voxclone" in client.get("/").text
    assert "/v1/tts" in client.get("/openapi.json").json()["paths"]
