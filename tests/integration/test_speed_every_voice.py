"""Speed is 1/speed of the duration for the standard voices too (issue 46).

Speed 2 gave x0.517-0.524 of the duration on the voices the standard catalog
speaks with (af_heart +5.0 %, bf_emma +4.1 %: Kokoro's own speed, used for
the first 1.2x, was calibrated on clear_female only); WSOLA now does every
speed change. bench/speed_curve.py measures all 56 built-in voices; here a
voice of each kind the old curve missed, each in its own language.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from installed_models import INSTALLED_MODELS
from voxclone.bootstrap import build_runtime
from voxclone.config import Settings
from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.controls import SpeechControls
from voxclone.synth.engine.kokoro.voice_packs import load_voice_packs, packs_dir

pytestmark = pytest.mark.models


SR = 24_000
TEXTS = {
    "en-us": "The source of the huge river is the clear spring.",
    "en-gb": "The source of the huge river is the clear spring.",
    "zh": "我姐姐星期天做蔬菜汤。",
}
# af_heart and bf_emma: the two worst of the old curve's English voices
# (+5.0 %, +4.1 % at speed 2); zm_yunjian: a Mandarin voice.
VOICES = ("af_heart", "bf_emma", "zm_yunjian")


@pytest.fixture(scope="module")
def standard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A runtime with Kokoro's standard voices (skipped without the packs)."""
    if len(load_voice_packs(INSTALLED_MODELS)) < 54:
        pytest.skip(f"Kokoro's standard packs are not installed in {packs_dir(INSTALLED_MODELS)}")
    models = tmp_path_factory.mktemp("voxclone-speed") / "models"
    models.mkdir()
    packs_dir(models).symlink_to(packs_dir(INSTALLED_MODELS), target_is_directory=True)
    runtime = build_runtime(
        Settings(home=models.parent, models_dir=models, memory_cache_mb=0, disk_cache_mb=0),
        warmup=False,
        with_voices=False,
    )
    try:
        yield runtime
    finally:
        runtime.close()


def _seconds(runtime: Any, voice: str, language: str, speed: float) -> float:
    request = SpeechRequest(
        text=TEXTS[language],
        voice=voice,
        language=language,
        controls=SpeechControls(speed=speed),
    )
    return len(runtime.speech.render_audio(request)) / SR


@pytest.mark.parametrize("voice", VOICES)
def test_speed_two_is_half_as_long_for_standard_voices(standard: Any, voice: str) -> None:
    language = standard.catalog.resolve(voice, None).language
    ratio = _seconds(standard, voice, language, 2.0) / _seconds(standard, voice, language, 1.0)
    assert ratio * 2.0 == pytest.approx(1.0, abs=0.03), ratio
