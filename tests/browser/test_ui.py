"""The web UI in a real browser against the real app: clone, speak, listen, delete.

Needs Debian's Chromium and loads the real models (enrollment and synthesis), so it
is marked ``browser``; run with ``python -m pytest tests/browser -m browser``.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.models, pytest.mark.timeout(420)]

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
# Unique per run: names are unique per owner, and a reused server may keep old voices.
VOICE_NAME = f"Browser test {uuid.uuid4().hex[:6]}"
SPOKEN_TEXT = "Hello from the browser test. This is a short sentence."
ENROLL_TIMEOUT_MS = 180_000
GENERATE_TIMEOUT_MS = 180_000

# Runs in the page: fetch the result Blob URL, decode it, measure it.
_MEASURE_RESULT_JS = """
async () => {
  const audio = document.getElementById('result-audio');
  const bytes = await (await fetch(audio.src)).arrayBuffer();
  const context = new AudioContext();
  const decoded = await context.decodeAudioData(bytes);
  const samples = decoded.getChannelData(0);
  let energy = 0;
  for (let i = 0; i < samples.length; i += 1) energy += samples[i] * samples[i];
  await context.close();
  return {
    duration: decoded.duration,
    rms: Math.sqrt(energy / Math.max(1, samples.length)),
    src: audio.src,
    download: document.getElementById('download').href,
  };
}
"""

# Runs in the page: form controls that a screen reader could not name.
_UNLABELLED_CONTROLS_JS = """
() => [...document.querySelectorAll('input, select, textarea')]
  .filter((el) => el.type !== 'hidden')
  .filter((el) => el.labels.length === 0 && !el.getAttribute('aria-label'))
  .map((el) => el.id || el.name || el.outerHTML.slice(0, 60))
"""


def _reference_clip() -> Path:
    clips = sorted(DATA_DIR.glob("librispeech_*.wav"))
    if not clips:
        pytest.fail("no LibriSpeech reference clip in tests/data/", pytrace=False)
    return clips[0]


def _api_voice_ids(app_url: str) -> set[str]:
    with urllib.request.urlopen(f"{app_url}/v1/voices", timeout=10) as response:
        return {voice["id"] for voice in json.load(response)["voices"]}


def _api_voice(app_url: str, voice_id: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{app_url}/v1/voices/{voice_id}", timeout=10) as response:
        return dict(json.load(response))


def _wait_for_success_or_alert(page: Any, success: str, alert: str, timeout_ms: int) -> None:
    """Wait until ``success`` matches; fail at once with the UI's message if ``alert`` fills."""
    page.wait_for_function(
        "([ok, bad]) => document.querySelector(ok) || document.querySelector(bad).textContent",
        arg=[success, alert],
        timeout=timeout_ms,
    )
    shown = page.locator(alert).inner_text().strip()
    assert not shown, f"the UI reported an error: {shown}"


@pytest.fixture()
def page_errors() -> list[str]:
    return []


def _open(browser: Any, app_url: str, width: int, height: int, errors: list[str]) -> Any:
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{app_url}/")
    page.wait_for_selector("body[data-ready='true']", timeout=30_000)
    return page


@pytest.fixture()
def desktop_page(browser: Any, app_url: str, page_errors: list[str]) -> Iterator[Any]:
    page = _open(browser, app_url, 1280, 900, page_errors)
    yield page
    page.context.close()


@pytest.fixture()
def phone_page(browser: Any, app_url: str, page_errors: list[str]) -> Iterator[Any]:
    page = _open(browser, app_url, 375, 740, page_errors)
    yield page
    page.context.close()


def test_clone_speak_listen_delete(
    desktop_page: Any, app_url: str, artifacts_dir: Path, page_errors: list[str]
) -> None:
    page = desktop_page
    create = page.locator("#create-voice")

    # Several recordings of one speaker can be chosen at once (sent as repeated fields).
    page.set_input_files("#ref-file", [str(_reference_clip()), str(_reference_clip())])
    assert "+1 more recording" in page.locator("#clip-name").inner_text()
    page.set_input_files("#ref-file", str(_reference_clip()))
    assert "more recording" not in page.locator("#clip-name").inner_text()
    page.fill("#voice-name", VOICE_NAME)
    assert create.is_disabled(), "Create must stay disabled until consent is given"
    page.check("#consent")
    assert create.is_enabled()
    create.click()

    library_item = page.locator("#voice-list li.voice", has_text=VOICE_NAME)
    _wait_for_success_or_alert(page, "#quality:not([hidden])", "#clone-alert", ENROLL_TIMEOUT_MS)
    library_item.wait_for(timeout=30_000)
    assert page.locator("#quality").is_visible()
    assert page.locator("#q-similarity").inner_text() != ""
    # Enrolled without waiting (wait=false): the report job's figures replace
    # "measuring…" when it is done.
    page.wait_for_function(
        "() => /^[0-9.−-]+$/.test(document.querySelector('#q-similarity').textContent.trim())",
        timeout=ENROLL_TIMEOUT_MS,
    )
    assert "measured" in page.locator("#enroll-label").inner_text()
    voice_id = library_item.get_attribute("data-voice-id")
    assert voice_id and voice_id in _api_voice_ids(app_url)
    # "Speaks as" tells the clone from a built-in the stock check kept instead.
    replaced = _api_voice(app_url, voice_id)["quality"].get("replaced_by_stock_voice")
    speaks_as = page.locator("#q-speaks-as").inner_text()
    if replaced:
        assert speaks_as.startswith(f"built-in voice {replaced},"), speaks_as
    else:
        assert speaks_as == "its own clone", speaks_as
    assert page.locator("#speak-voice").input_value() == voice_id
    page.screenshot(path=str(artifacts_dir / "ui_after_clone.png"), full_page=True)

    page.fill("#speak-text", SPOKEN_TEXT)
    assert page.locator("#char-count").inner_text().startswith(f"{len(SPOKEN_TEXT)} /")
    page.click("#generate")
    _wait_for_success_or_alert(
        page, "#result-audio[src^='blob:']", "#speak-alert", GENERATE_TIMEOUT_MS
    )
    assert page.locator("#speak-alert").inner_text() == ""
    result = page.evaluate(_MEASURE_RESULT_JS)
    assert 0.5 <= result["duration"] <= 15.0, result
    assert result["rms"] > 0.01, f"generated audio is (nearly) silent: {result}"
    assert result["download"] == result["src"], "Download must offer the same audio"
    page.screenshot(path=str(artifacts_dir / "ui_after_generate.png"), full_page=True)

    library_item.get_by_role("button", name=f"Delete {VOICE_NAME}").click()
    dialog = page.locator("#confirm-dialog")
    dialog.wait_for(state="visible")
    page.screenshot(path=str(artifacts_dir / "ui_delete_dialog.png"))
    dialog.get_by_role("button", name="Delete").click()
    library_item.wait_for(state="detached", timeout=30_000)
    assert voice_id not in _api_voice_ids(app_url)
    assert page_errors == []


def test_phone_layout_labels_and_error_alert(
    phone_page: Any, artifacts_dir: Path, page_errors: list[str]
) -> None:
    page = phone_page

    def scroll_width() -> int:
        return int(page.evaluate("() => document.documentElement.scrollWidth"))

    assert scroll_width() <= 375, "page overflows horizontally on a 375 px phone"
    assert page.evaluate(_UNLABELLED_CONTROLS_JS) == []

    # Empty text is refused by the API; its message must reach the alert region.
    page.fill("#speak-text", "")
    page.click("#generate")
    alert = page.locator("#speak-alert[role='alert']")
    alert.locator(".alert-message").wait_for(timeout=30_000)
    assert alert.is_visible()
    assert len(alert.inner_text().strip()) > 5
    assert not page.locator("#generate").is_disabled(), "Generate must be usable again"
    assert scroll_width() <= 375, "the error message made the page overflow"
    page.screenshot(path=str(artifacts_dir / "ui_phone_error.png"), full_page=True)
    assert page_errors == []


# Runs in the page: the numbered panel titles in visual reading order (rows, then columns).
_PANELS_IN_READING_ORDER_JS = """
() => [...document.querySelectorAll('main > section.card')]
  .map((el) => ({ title: el.querySelector('h2').textContent.trim(),
                  top: Math.round(el.getBoundingClientRect().top + window.scrollY),
                  left: Math.round(el.getBoundingClientRect().left) }))
  .sort((a, b) => (a.top - b.top) || (a.left - b.left))
  .map((p) => p.title)
"""


@pytest.mark.parametrize("width,height", [(1280, 900), (375, 740)])
def test_panels_read_one_two_three(
    browser: Any, app_url: str, page_errors: list[str], width: int, height: int
) -> None:
    page = _open(browser, app_url, width, height, page_errors)
    try:
        titles = page.evaluate(_PANELS_IN_READING_ORDER_JS)
        numbers = [t.split(".", 1)[0] for t in titles]
        assert numbers == ["1", "2", "3"], titles
        # DOM order = visual order, so keyboard and screen-reader users meet them alike.
        dom = page.eval_on_selector_all("main > section.card h2", "els => els.map(e => e.id)")
        assert [d for d in dom] == ["clone-title", "speak-title", "library-title"]
        speak_top = page.locator("#speak").bounding_box()["y"]
        library_top = page.locator("#library").bounding_box()["y"]
        if width < 900:
            # A phone reaches "Speak" before the (possibly long) voice library.
            assert speak_top < library_top
    finally:
        page.context.close()
    assert page_errors == []


def test_builtin_voice_description_and_waveform(
    desktop_page: Any, artifacts_dir: Path, page_errors: list[str]
) -> None:
    page = desktop_page
    select = page.locator("#speak-voice")
    labels = select.locator("option").all_inner_texts()
    # OpenAI's names are offered, and no option label is a cut-off description.
    assert "alloy" in labels and "echo" in labels, labels
    assert all(len(label) <= 32 for label in labels), labels
    help_text = page.locator("#speak-voice-help").inner_text()
    described = page.evaluate(
        "() => document.querySelector('#speak-voice').selectedOptions[0].title"
    )
    assert described and help_text == described, (help_text, described)

    page.fill("#speak-text", "Good morning, Sam.")
    page.click("#generate")
    _wait_for_success_or_alert(
        page, "#result-wave:not([hidden])[data-columns]", "#speak-alert", GENERATE_TIMEOUT_MS
    )
    columns = int(page.locator("#result-wave").get_attribute("data-columns") or 0)
    width = int(page.evaluate("() => document.getElementById('result-wave').width"))
    # Speech fills a good part of the picture; silence alone would draw nothing.
    assert columns > 0.3 * width, (columns, width)
    # The word being heard is highlighted (word timestamps, the playback clock).
    current = page.locator("#result-words .word.current")
    current.wait_for(timeout=30_000)
    assert current.inner_text().strip(" ,.") in {"Good", "morning", "Sam"}
    page.locator("#speak").screenshot(path=str(artifacts_dir / "ui_waveform.png"))
    assert page_errors == []


def test_api_docs_work_offline(browser: Any, app_url: str, artifacts_dir: Path) -> None:
    """``/docs`` lists the routes with every request off this machine refused."""
    from urllib.parse import urlsplit

    blocked: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})

    def only_loopback(route: Any) -> None:
        host = urlsplit(route.request.url).hostname or ""
        if host in ("127.0.0.1", "localhost", "::1") or route.request.url.startswith("data:"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", only_loopback)
    page = context.new_page()
    try:
        page.goto(f"{app_url}/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=30_000)
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        assert any("/v1/tts" in p for p in paths), paths
        assert any("/v1/audio/speech" in p for p in paths), paths
        page.screenshot(path=str(artifacts_dir / "api_docs_offline.png"))
    finally:
        context.close()
    assert blocked == [], f"/docs tried to reach the network: {blocked}"
