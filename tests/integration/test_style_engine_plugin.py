"""A *style* engine with cloning added from another distribution: one package,
no line in voxclone.

The plug-in is an installed distribution (a ``dist-info`` with an
``entry_points.txt`` on ``sys.path``) whose ``create`` returns the hum engine
of hum_style_engine: six [16, 1, 16] packs at 16 kHz, its own voice names, and
nothing else for cloning (no atlas, no fitted pick tables, no comparison
list). The composition root must get what style cloning needs through
``Engine.cloning()``: measure an atlas on those packs, enroll a clone from a
real recording, make it speak at the recording's pitch through the engine's
own style space, and compare it with the plug-in's voices, not Kokoro's.
Before the hook, ``build_voice_service`` loaded Kokoro's shipped atlas on
the plug-in's packs and the start failed (the atlas's packs are not
installed). Marked ``models``: enrollment loads the speaker encoder and Whisper.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hum_style_engine import PACK_PITCH, ROWS
from plugin_dist import install_engine_plugin
from test_prompt_engine import CONSENT, REFERENCE, _dominant_hz

from voxclone.bootstrap import build_runtime
from voxclone.config import Settings
from voxclone.service.speech.service import SpeechRequest
from voxclone.service.voices.request import EnrollRequest
from voxclone.synth.engine import registry
from voxclone.synth.voice.prosody import pitch_stats

pytestmark = pytest.mark.models

PLUGIN = "voxclone_hum_plugin"
NAME = "hums-plugin"


def _install_plugin(site: Path) -> None:
    install_engine_plugin(
        site,
        package=PLUGIN,
        distribution="voxclone-hum-plugin",
        engine=NAME,
        engine_class="hum_style_engine.HumStyleEngine",
        argument=NAME,
    )


def _reference_hz() -> float:
    import soundfile as sf

    audio, rate = sf.read(REFERENCE, dtype="float32")
    return pitch_stats(audio, rate).median_hz


def test_style_engine_from_an_entry_point_clones_and_speaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert NAME not in registry.names()
    _install_plugin(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, PLUGIN, raising=False)
    assert NAME in registry.names()

    home = tmp_path / "home"
    runtime = build_runtime(
        Settings(home=home, models_dir=home / "models", engines=NAME, warm_cloning=False)
    )
    try:
        voices = runtime.voices
        assert voices is not None
        # The atlas was measured on the plug-in's packs and kept for the next start.
        (cached,) = (home / "models" / "atlas").glob("atlas-*.npz")
        assert sorted(str(n) for n in np.load(cached)["pack_names"]) == sorted(PACK_PITCH)

        record, _ = voices.enroll(
            EnrollRequest(
                audio=REFERENCE.read_bytes(),
                name="Hum",
                owner="alice",
                consent=CONSENT,
                keep_clone=True,
            )
        )
        assert record.engine == NAME and record.prompt is None
        assert record.style is not None and record.style.shape == (ROWS, 1, 16)
        # Not one of the packs: a voice the cloner made in the engine's space.
        packs = runtime.engines[NAME].engine.style_packs()
        assert not any(np.allclose(record.style, p) for p in packs.values())
        quality = record.quality
        assert {"similarity", "wer", "instant_clone_s"} <= set(quality)
        # Compared with the plug-in's own voices, of the reference's sex (a man's).
        compared = quality.get("closest_builtin") or quality.get("stock_voice")
        assert compared in PACK_PITCH and PACK_PITCH[compared][1] == "M", quality

        speech = runtime.speech.synthesize(
            SpeechRequest(text="Hello there.", voice=record.id, owner="alice", language="en-us")
        )
        # The clone speaks at the reference's pitch (~106 Hz, between the packs'
        # 95 and 112 Hz): found by the atlas pick and the pitch calibration in
        # the plug-in's style space.
        target = _reference_hz()
        assert abs(_dominant_hz(speech.audio) - target) < 0.04 * target
    finally:
        runtime.close()
    monkeypatch.delitem(sys.modules, PLUGIN, raising=False)
