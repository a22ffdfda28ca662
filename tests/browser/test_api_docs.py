"""ReDoc (``/redoc``) and Swagger UI (``/docs``) render the API in real Chromium,
``POST /v1/tts`` included, with no error: the document referenced a
``TTSRequest`` schema it lacked, so ReDoc showed only "Something went wrong"
and Swagger UI two resolver errors and a body example of ``"string"``.

The docs need no models: the real app is served by uvicorn without its
lifespan (nothing loads) on a loopback port of this process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from voxclone.api.app import create_app
from voxclone.config import Settings
from voxclone.devserver import free_loopback_port

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

PAGE_TIMEOUT_MS = 60_000
SUMMARY = "Speak text (JSON, or multipart with an inline reference clip)"
# Rendered, or given up: ReDoc's error page says this instead of the operations.
_REDOC_SETTLED_JS = """
() => document.body.innerText.includes('Something went wrong')
   || document.body.innerText.includes('SUMMARY')
""".replace("SUMMARY", SUMMARY)


@pytest.fixture(scope="module")
def docs_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import uvicorn

    app = create_app(Settings(home=tmp_path_factory.mktemp("docs-home")))
    port = free_loopback_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "docs server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def _page(browser: Any) -> tuple[Any, list[str]]:
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "console",
        lambda msg: problems.append(f"console: {msg.text}") if msg.type == "error" else None,
    )
    # The docs work offline: nothing is fetched from beyond this server.
    page.on(
        "request",
        lambda req: (
            None
            if req.url.startswith(("http://127.0.0.1:", "data:", "blob:"))
            else problems.append(f"off-machine request: {req.url}")
        ),
    )
    return page, problems


def test_redoc_renders_the_tts_operation(browser: Any, docs_url: str, artifacts_dir: Path) -> None:
    page, problems = _page(browser)
    try:
        page.goto(f"{docs_url}/redoc")
        page.wait_for_function(_REDOC_SETTLED_JS, timeout=PAGE_TIMEOUT_MS)
        body = page.inner_text("body")
        page.screenshot(path=str(artifacts_dir / "redoc.png"))
        assert "Something went wrong" not in body, body[:1000]
        # The operation's section lists the request body's own fields, from
        # the TTSRequest schema.
        tts = page.locator("[data-section-id='tag/speech/operation/tts_v1_tts_post']")
        assert tts.count() == 1
        text = tts.inner_text()
        assert "timestamps" in text and "sample_rate" in text, text[:2000]
        assert problems == []
    finally:
        page.close()


def test_swagger_ui_shows_the_tts_body_without_resolver_errors(
    browser: Any, docs_url: str, artifacts_dir: Path
) -> None:
    page, problems = _page(browser)
    try:
        page.goto(f"{docs_url}/docs")
        operation = page.locator("#operations-speech-tts_v1_tts_post")
        operation.wait_for(timeout=PAGE_TIMEOUT_MS)
        operation.locator(".opblock-summary").click()
        example = operation.locator(".body-param__example, .microlight").first
        example.wait_for(timeout=PAGE_TIMEOUT_MS)
        page.screenshot(path=str(artifacts_dir / "swagger.png"), full_page=True)
        assert page.locator(".errors-wrapper").count() == 0, page.locator(
            ".errors-wrapper"
        ).first.inner_text()
        shown = operation.inner_text()
        assert "Hello! This is voxclone speaking." in shown, shown[:2000]
        assert "Resolver error" not in page.inner_text("body")
        assert problems == []
    finally:
        page.close()
