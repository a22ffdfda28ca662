"""Done-when of issue 46: a brand-new VOXCLONE_HOME lists Kokoro's standard
voices, read from the installation's models folder (before: the 7 earlier
built-ins, default clear_female, because models lived in <home>/models)."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxclone.api.cli import main
from voxclone.config import Settings
from voxclone.models_location import MODELS_DIR_ENV
from voxclone.synth.engine.kokoro.voice_packs import load_voice_packs, packs_dir

pytestmark = pytest.mark.models


def test_a_new_home_lists_the_standard_voices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(MODELS_DIR_ENV, raising=False)
    monkeypatch.delenv("VOXCLONE_HOME", raising=False)
    installed = Settings().models_dir  # the default home's
    if len(load_voice_packs(installed)) < 54:
        pytest.skip(f"standard voice packs not installed in {packs_dir(installed)}")
    for home in ("first", "second"):
        monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / home))
        assert Settings().models_dir == installed
        assert main(["voices", "list"]) == 0
        names = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line}
        assert {"af_heart", "am_michael", "ef_dora", "clear_female"} <= names
        assert len(names) >= 54
        assert not (tmp_path / home / "models").exists()
