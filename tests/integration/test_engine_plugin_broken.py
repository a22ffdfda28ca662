"""A broken engine plug-in cannot take the server or the CLI down (issue 45).

The plug-in is an installed distribution (``plugin_dist.install_engine_plugin``)
whose package raises at import. Named in ``VOXCLONE_ENGINES`` beside a
working engine, the server must serve the working one and say on ``/readyz``
and in its log which one failed; ``voxclone models list`` must list it as
broken with its error instead of crashing.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from plugin_dist import install_engine_plugin
from test_prompt_engine import TonePromptEngine

from voxclone.api.app import create_app
from voxclone.api.cli import main
from voxclone.config import Settings
from voxclone.engine_setup import EngineFailure, build_engines
from voxclone.errors import ModelAssetError
from voxclone.synth.engine import registry
from voxclone.synth.engine.base import EngineConfig

GOOD, BROKEN = "voxclone_tones_ok_plugin", "voxclone_broken_plugin"
READY_WAIT_S = 60.0


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A working plug-in engine ("tones-ok") and one that raises at import ("broken")."""
    site = tmp_path / "site"
    for package, engine in ((GOOD, "tones-ok"), (BROKEN, "broken")):
        install_engine_plugin(
            site,
            package=package,
            distribution=package.replace("_", "-"),
            engine=engine,
            engine_class="test_prompt_engine.TonePromptEngine",
            argument=engine,
        )
    (site / BROKEN / "__init__.py").write_text('raise RuntimeError("plug-in boom at import")\n')
    monkeypatch.syspath_prepend(str(site))
    for package in (GOOD, BROKEN):
        monkeypatch.delitem(sys.modules, package, raising=False)


def _wait_ready(client: TestClient) -> Any:
    deadline = time.monotonic() + READY_WAIT_S
    while True:
        response = client.get("/readyz")
        loading = response.status_code == 503 and "models are loading" in response.text
        if not loading or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


@pytest.mark.usefixtures("plugins")
def test_server_serves_the_engines_that_loaded_and_names_the_broken_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(home=tmp_path / "home", engines="broken,tones-ok", warm_cloning=False)
    caplog.set_level(logging.ERROR, logger="voxclone.engine_setup")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        ready = _wait_ready(client)
        # Old code: 503 "model loading failed: RuntimeError" for ever, nothing served.
        assert ready.status_code == 200, ready.text
        assert ready.json()["detail"]["engines"] == {
            "tones-ok": "ready",
            "broken": "failed: ModelAssetError",
        }
        spoken = client.post(
            "/v1/tts", json={"text": "Hello.", "voice": "tone_low", "language": "en-us"}
        )
        assert spoken.status_code == 200, spoken.text
        models = {m["id"] for m in client.get("/v1/models").json()["data"]}
        assert "tones-ok" in models and "broken" not in models
        unknown = client.post(
            "/v1/tts", json={"text": "Hello.", "voice": "tone_low", "model": "broken"}
        )
        assert unknown.status_code == 400  # a failed engine is not served, nor a 5xx
    logged = [r.getMessage() for r in caplog.records if r.name == "voxclone.engine_setup"]
    assert any("'broken'" in m and "RuntimeError: plug-in boom at import" in m for m in logged)


@pytest.mark.usefixtures("plugins")
def test_models_list_names_a_broken_plugin_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "home"))
    # Old code: RuntimeError escaped from `voxclone models list`.
    assert main(["models", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    broken = [line for line in lines if line.startswith("broken ")]
    assert len(broken) == 1 and "BROKEN" in broken[0]
    assert "RuntimeError: plug-in boom at import" in broken[0]
    assert any(line.startswith("kokoro ") for line in lines)  # the others are still listed


@pytest.mark.usefixtures("plugins")
def test_no_engine_loading_is_still_a_failed_start(tmp_path: Path) -> None:
    failed: dict[str, EngineFailure] = {}
    with pytest.raises(ModelAssetError, match="plug-in boom at import"):
        build_engines(Settings(home=tmp_path, engines="broken"), failed=failed)
    assert failed["broken"].error == "ModelAssetError"


def test_an_engine_whose_load_raises_is_left_out(tmp_path: Path) -> None:
    class FailingLoad(TonePromptEngine):
        def load(self) -> None:
            raise OSError("weights unreadable")

    def failing(config: EngineConfig) -> FailingLoad:
        return FailingLoad("failing")

    def working(config: EngineConfig) -> TonePromptEngine:
        return TonePromptEngine("working")

    registry.register("failing", failing)
    registry.register("working", working)
    try:
        failed: dict[str, EngineFailure] = {}
        engines = build_engines(Settings(home=tmp_path, engines="failing,working"), failed=failed)
    finally:
        registry.unregister("failing")
        registry.unregister("working")
    assert list(engines) == ["working"]
    assert failed == {"failing": EngineFailure("OSError", "weights unreadable")}
