"""A one-shot ``voxclone say`` loads the engine in a thread while the rest is
imported (engine_setup.EngineLoad), and the runtime built on that load speaks
as one that loaded itself. Marked ``models``: the real Kokoro graph."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from voxclone.api.cli import main
from voxclone.bootstrap import build_runtime
from voxclone.config import Settings
from voxclone.engine_setup import EngineLoad
from voxclone.errors import ModelAssetError
from voxclone.service.speech.service import SpeechRequest
from voxclone.synth.engine import registry
from voxclone.synth.engine.kokoro.engine import KokoroEngine

pytestmark = pytest.mark.models


def _record_loading_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    threads: list[str] = []
    original = KokoroEngine.load

    def load(self: KokoroEngine) -> None:
        threads.append(threading.current_thread().name)
        original(self)

    monkeypatch.setattr(KokoroEngine, "load", load)
    return threads


def test_a_runtime_built_on_a_started_load_speaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = _record_loading_threads(monkeypatch)
    settings = Settings(home=tmp_path / "home", warm_cloning=False)
    load = EngineLoad(settings)
    runtime = build_runtime(settings, warmup=False, with_voices=False, engine_load=load)
    try:
        result = runtime.speech.synthesize(SpeechRequest(text="Hello there.", format="wav"))
    finally:
        runtime.close()
    assert threads[0] == "engine-load"
    assert len(result.audio) > 20_000
    assert "kokoro_load" in runtime.stages.as_dict()


def test_a_failed_load_is_raised_by_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str, config: object) -> object:
        raise ModelAssetError("the Kokoro model could not be loaded")

    monkeypatch.setattr(registry, "create", broken)
    load = EngineLoad(Settings(home=tmp_path / "home"))
    with pytest.raises(ModelAssetError):
        load.result()


def test_say_in_process_loads_the_engine_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = _record_loading_threads(monkeypatch)
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "home"))
    out = tmp_path / "hi.wav"
    assert main(["say", "Hi.", "-o", str(out), "--local"]) == 0
    assert out.stat().st_size > 10_000
    # Before: the model loaded in the main thread, after every import.
    assert threads == ["engine-load"]
