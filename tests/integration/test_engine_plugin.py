"""An engine with cloning added from another distribution: one package, no line in voxclone.

The plug-in is a real installed distribution (a ``dist-info`` with an
``entry_points.txt`` on ``sys.path``, as pip would leave it) whose only code is
a ``create`` function returning the prompt-cloning tone engine of
test_prompt_engine. The registry must find it through the ``voxclone.engines``
entry-point group, import it only when it is created, and the composition root
must enroll a clone with it and speak in that clone's voice. Marked ``models``:
enrollment's quality report loads the speaker encoder and Whisper.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from plugin_dist import install_engine_plugin
from test_prompt_engine import CONSENT, REFERENCE, _dominant_hz

from voxclone.bootstrap import build_runtime
from voxclone.config import Settings
from voxclone.errors import InvalidInput
from voxclone.service.speech.service import SpeechRequest
from voxclone.service.voices.request import EnrollRequest
from voxclone.synth.engine import registry

pytestmark = pytest.mark.models

PLUGIN = "voxclone_tones_plugin"


def _install_plugin(site: Path) -> None:
    install_engine_plugin(
        site,
        package=PLUGIN,
        distribution="voxclone-tones-plugin",
        engine="tones-plugin",
        engine_class="test_prompt_engine.TonePromptEngine",
        argument="tones-plugin",
    )


def test_engine_from_an_entry_point_clones_and_speaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "tones-plugin" not in registry.names()
    _install_plugin(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, PLUGIN, raising=False)

    # Listed from metadata alone: the plug-in's module is not imported yet.
    assert "tones-plugin" in registry.names()
    assert PLUGIN not in sys.modules

    runtime = build_runtime(
        Settings(home=tmp_path / "home", engines="tones-plugin", warm_cloning=False)
    )
    try:
        assert runtime.voices is not None
        record, _ = runtime.voices.enroll(
            EnrollRequest(audio=REFERENCE.read_bytes(), name="Plug", owner="alice", consent=CONSENT)
        )
        assert record.engine == "tones-plugin" and record.prompt is not None
        speech = runtime.speech.synthesize(
            SpeechRequest(text="Hello there.", voice=record.id, owner="alice", language="en-us")
        )
        # Spoken by the plug-in, at the pitch it measured from the reference.
        f0 = json.loads(record.prompt)["f0_hz"]
        assert abs(_dominant_hz(speech.audio) - f0) < 0.05 * f0
    finally:
        runtime.close()
    monkeypatch.delitem(sys.modules, PLUGIN, raising=False)


def test_an_unknown_engine_names_the_plugins_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_plugin(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(InvalidInput) as excinfo:
        registry.factory("no-such-engine")
    assert "tones-plugin" in str(excinfo.value)
