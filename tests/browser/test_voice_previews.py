"""Built-in voice previews in a real browser: grouped by language, each voice says a
short sentence of its language through this server's /v1/tts, and the second play
is answered by the server's cache. Nothing is fetched from off this machine."""

from __future__ import annotations

import base64
import io
import json
import os
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest

from installed_models import INSTALLED_MODELS
from voxclone.devserver import ServerNotReady, running_server
from voxclone.synth.engine.kokoro.voice_packs import packs_dir

pytestmark = [pytest.mark.browser, pytest.mark.models, pytest.mark.timeout(420)]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
READY_TIMEOUT_S = 120.0
SYNTH_TIMEOUT_MS = 120_000
# A cache hit skips synthesis: the click answers in milliseconds; this bound
# leaves room for a busy machine and is still far below a fresh render.
CACHED_PLAY_MS = 1_500


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real app, with Kokoro's standard voices when they are installed here
    (``make install``), so the previews come in language groups; without them
    the fallback voices are previewed."""
    external = os.environ.get("VOXCLONE_UI_TEST_URL")
    if external:
        yield external.rstrip("/")
        return
    home = tmp_path_factory.mktemp("voxclone-previews")
    if packs_dir(INSTALLED_MODELS).is_dir():
        (home / "models").mkdir()
        packs_dir(home / "models").symlink_to(packs_dir(INSTALLED_MODELS), target_is_directory=True)
    try:
        with running_server(home, timeout_s=READY_TIMEOUT_S) as server:
            yield server.url
    except ServerNotReady as exc:
        pytest.fail(f"voxclone app did not become ready: {exc}", pytrace=False)


# Runs in the page before the app: keeps a copy of every /v1/tts answer's bytes
# (Playwright does not hand back the body of a response the page read as a Blob).
_KEEP_TTS_AUDIO_JS = """
(() => {
  const original = window.fetch;
  window.__ttsAudio = [];
  window.fetch = async (...args) => {
    const response = await original(...args);
    if (String(args[0]).endsWith("/v1/tts")) {
      const bytes = new Uint8Array(await response.clone().arrayBuffer());
      let text = "";
      for (let i = 0; i < bytes.length; i += 1) text += String.fromCharCode(bytes[i]);
      window.__ttsAudio.push(btoa(text));
    }
    return response;
  };
})();
"""


@pytest.fixture()
def previews_page(browser: Any, app_url: str) -> Iterator[tuple[Any, list[str], list[str]]]:
    """The UI with its previews open; (page, page errors, requests off this machine)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    off_machine: list[str] = []

    def off_this_machine(url: str) -> bool:
        return not url.startswith(("data:", "blob:")) and urlsplit(url).hostname not in LOOPBACK

    def refuse(route: Any) -> None:
        off_machine.append(route.request.url)
        route.abort()

    # Only requests off this machine are routed (a routed response's body is
    # not kept, and the test reads the audio the server sent).
    context.route(off_this_machine, refuse)
    page = context.new_page()
    page.add_init_script(_KEEP_TTS_AUDIO_JS)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{app_url}/")
    page.wait_for_selector("body[data-ready='true']", timeout=30_000)
    page.click("#voice-previews > summary")
    try:
        yield page, errors, off_machine
    finally:
        context.close()


def _pick_voice(page: Any) -> tuple[str, str]:
    """(voice id, its language): French's ff_siwis when installed, else the first
    voice of the first group that is not English (or the first voice at all)."""
    ids = page.eval_on_selector_all(".preview-item", "els => els.map(e => e.dataset.voiceId)")
    assert ids, "no built-in voice is offered for preview"
    voices = page.evaluate("async () => (await fetch('v1/audio/voices')).json()")
    language = {v["id"]: v.get("language") for v in voices["voices"]}
    if "ff_siwis" in ids:
        return "ff_siwis", "fr"
    for voice_id in ids:
        if language.get(voice_id) and not str(language[voice_id]).startswith("en"):
            return voice_id, str(language[voice_id])
    return ids[0], str(language.get(ids[0]) or "en-us")


def _wav_seconds_and_rms(body: bytes) -> tuple[float, float]:
    with wave.open(io.BytesIO(body)) as wav:
        frames = wav.readframes(wav.getnframes())
        rate = wav.getframerate()
        assert wav.getsampwidth() == 2 and wav.getnchannels() == 1
    samples = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    return samples.size / rate, float(np.sqrt(np.mean(samples**2))) if samples.size else 0.0


def _last_audio(page: Any) -> bytes:
    """The bytes of the page's last /v1/tts answer."""
    return base64.b64decode(page.evaluate("() => window.__ttsAudio.at(-1)"))


def _play(page: Any, voice_id: str) -> tuple[Any, Any]:
    """Click the voice's Play button; (its /v1/tts response, the button)."""
    button = page.locator(f".preview-item[data-voice-id='{voice_id}'] .preview-play")
    with page.expect_response(
        lambda r: r.url.endswith("/v1/tts") and r.request.method == "POST",
        timeout=SYNTH_TIMEOUT_MS,
    ) as answer:
        button.click()
    page.wait_for_function(
        "(b) => b.dataset.state === 'playing'", arg=button.element_handle(), timeout=30_000
    )
    return answer.value, button


def test_preview_plays_the_voices_language_and_is_cached(
    previews_page: tuple[Any, list[str], list[str]], artifacts_dir: Path
) -> None:
    page, errors, off_machine = previews_page

    # Grouped by language: one heading per group, a Play and a Use button per voice.
    headings = page.locator(".preview-group h3").all_inner_texts()
    assert headings, "the previews are not grouped"
    items = page.locator(".preview-item")
    assert items.count() == page.locator(".preview-item .preview-play").count()
    assert items.count() == page.locator(".preview-item .preview-use").count()

    voice_id, language = _pick_voice(page)
    if voice_id == "ff_siwis":  # the standard voices: one group per accent
        assert "French" in headings and "American English" in headings, headings
    first, button = _play(page, voice_id)
    assert first.status == 200, first.text()
    first_audio = _last_audio(page)
    sent = json.loads(first.request.post_data or "{}")
    assert sent["voice"] == voice_id and sent["language"] == language, sent
    seconds, rms = _wav_seconds_and_rms(first_audio)
    assert seconds > 1.0 and rms > 0.01, (seconds, rms)  # a sentence was said, not silence
    page.locator("#voice-previews").screenshot(path=str(artifacts_dir / "ui_voice_previews.png"))

    # It plays to its end and the button is ready again.
    page.wait_for_function(
        "(b) => b.dataset.state === 'idle'", arg=button.element_handle(), timeout=60_000
    )

    # Second play: the same request, answered from the server's cache.
    second, button = _play(page, voice_id)
    assert second.status == 200
    # X-Cache names the cache tier that answered ("memory", "disk", ...) or says "miss".
    assert second.headers.get("x-cache") not in (None, "", "miss"), second.headers
    assert button.get_attribute("data-cache") == second.headers["x-cache"]
    assert _last_audio(page) == first_audio
    assert int(button.get_attribute("data-ms") or 1e9) < CACHED_PLAY_MS
    button.click()  # a click on a playing preview stops it
    assert button.get_attribute("data-state") == "idle"

    # "Use" chooses the voice, and its language, for speaking.
    page.locator(f".preview-item[data-voice-id='{voice_id}'] .preview-use").click()
    assert page.locator("#speak-voice").input_value() == voice_id
    assert page.locator("#speak-language").input_value() == language

    assert page.locator("#preview-alert").inner_text().strip() == ""
    assert errors == []
    assert off_machine == [], f"the page reached off this machine: {off_machine}"


def test_previews_fit_a_phone(previews_page: tuple[Any, list[str], list[str]]) -> None:
    page, errors, _ = previews_page
    page.set_viewport_size({"width": 375, "height": 740})
    width = int(page.evaluate("() => document.documentElement.scrollWidth"))
    assert width <= 375, "the open previews overflow a 375 px phone"
    assert errors == []
