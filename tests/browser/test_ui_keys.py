"""The web UI against a server with API keys on (issue 46): the page says at once,
in a banner, that a key is needed and where it goes; it used to show empty voice
lists with no word why until Generate failed with a 401.

Its own server: a key created before it starts turns keys on for every request.
No cloning model is needed, so this module is ``browser`` only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from voxclone.api.auth import key_db_path
from voxclone.devserver import ServerNotReady, running_server
from voxclone.runtime.keys import SCOPE_TTS, SCOPE_VOICES_READ, KeyStore

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]

READY_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def keyed_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, a valid key) of a real app whose home has a key."""
    home = tmp_path_factory.mktemp("voxclone-keys")
    key, _ = KeyStore(key_db_path(home)).create("browser", {SCOPE_TTS, SCOPE_VOICES_READ})
    try:
        with running_server(home, timeout_s=READY_TIMEOUT_S) as server:
            yield server.url, key
    except ServerNotReady as exc:
        pytest.fail(f"voxclone app did not become ready: {exc}", pytrace=False)


@pytest.fixture()
def page(browser: Any, keyed_app: tuple[str, str]) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.goto(f"{keyed_app[0]}/")
    opened.wait_for_selector("body[data-ready='true']", timeout=30_000)
    yield opened
    context.close()
    assert errors == []


def test_a_key_banner_shows_on_load_and_goes_with_a_valid_key(
    page: Any, keyed_app: tuple[str, str], artifacts_dir: Path
) -> None:
    banner = page.locator("#key-banner[role='alert']")
    # At once, before anything was generated: the page loaded with a 401.
    assert banner.is_visible(), "no notice that this server needs an API key"
    assert "needs an API key" in banner.inner_text()
    assert "Connection settings" in banner.inner_text()
    assert page.locator("#speak-alert").inner_text() == ""
    # The library says why it is empty (it used to say "No cloned voices yet.").
    assert "API key" in page.locator("#library-empty").inner_text()
    page.screenshot(path=str(artifacts_dir / "ui_key_banner.png"))

    # Its button leads to the key field.
    banner.get_by_role("button", name="Enter API key").click()
    assert page.locator("details.settings").get_attribute("open") is not None
    assert page.evaluate("() => document.activeElement.id") == "api-key"

    # A wrong key: the banner says the key was refused.
    page.fill("#api-key", "vox_not-a-real-key-aaaaaaaaaaaaaaaaaaaaaaa")
    page.dispatch_event("#api-key", "change")
    page.wait_for_function(
        "() => document.querySelector('#key-banner').textContent.includes('refused')"
    )

    # The right key: the banner goes and the voices are listed.
    page.fill("#api-key", keyed_app[1])
    page.dispatch_event("#api-key", "change")
    banner.wait_for(state="hidden", timeout=30_000)
    page.wait_for_function(
        "() => document.querySelectorAll('#speak-voice option').length > 0", timeout=30_000
    )
    assert page.locator("#library-empty").inner_text() == "No cloned voices yet."

    # Kept in this browser: a reload needs no banner.
    page.reload()
    page.wait_for_selector("body[data-ready='true']", timeout=30_000)
    assert not banner.is_visible()
