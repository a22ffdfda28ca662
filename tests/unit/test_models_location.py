"""Models are installation data: every VOXCLONE_HOME of one installation reads
the same models folder (issue 46), and an older per-home folder is still read."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from voxclone.config import Settings
from voxclone.models_location import (
    MODELS_DIR_ENV,
    installation_models_dir,
    legacy_note,
    user_models_dir,
)
from voxclone.synth.engine.base import EngineConfig
from voxclone.synth.engine.registry import create


@pytest.fixture()
def installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh installation: its prefix (a writable venv) and user cache in tmp_path."""
    monkeypatch.delenv(MODELS_DIR_ENV, raising=False)
    monkeypatch.delenv("VOXCLONE_HOME", raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "venv").mkdir()
    return tmp_path


def test_two_new_homes_share_the_installations_models(installation: Path) -> None:
    first = Settings(home=installation / "home-a").models_dir
    second = Settings(home=installation / "home-b").models_dir
    assert (
        first == second == installation_models_dir() == installation / "venv/share/voxclone/models"
    )


def test_the_user_cache_when_the_installation_cannot_be_written(
    installation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A prefix that cannot be created (root may write anywhere, so under a file).
    (installation / "a-file").write_bytes(b"")
    monkeypatch.setattr(sys, "prefix", str(installation / "a-file" / "venv"))
    assert Settings(home=installation / "home-a").models_dir == user_models_dir()
    assert user_models_dir() == installation / "cache" / "voxclone" / "models"


def test_models_already_in_the_user_cache_serve_every_home(installation: Path) -> None:
    # Where every earlier version kept the default home's models.
    packs = user_models_dir() / "kokoro-voice-packs"
    packs.mkdir(parents=True)
    (packs / "af_heart.bin").write_bytes(b"x")
    for home in ("home-a", "home-b", "cache/voxclone"):
        assert Settings(home=installation / home).models_dir == user_models_dir()


def test_an_older_homes_own_models_are_still_read_and_said(installation: Path) -> None:
    home = installation / "old-home"
    (home / "models").mkdir(parents=True)
    (home / "models" / "kokoro.onnx").write_bytes(b"x")
    chosen = Settings(home=home).models_dir
    assert chosen == home / "models"
    note = legacy_note(home, chosen)
    assert note is not None and str(installation_models_dir()) in note
    # The shared folder wins once it holds models.
    installation_models_dir().mkdir(parents=True)
    (installation_models_dir() / "kokoro.onnx").write_bytes(b"x")
    assert Settings(home=home).models_dir == installation_models_dir()
    assert legacy_note(home, installation_models_dir()) is None


def test_the_environment_names_the_folder(
    installation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODELS_DIR_ENV, str(installation / "elsewhere"))
    assert Settings(home=installation / "home-a").models_dir == installation / "elsewhere"


def test_kokoro_says_when_its_standard_voice_packs_are_missing(tmp_path: Path) -> None:
    # No model load: the check reads the packs folder only.
    engine = create("kokoro", EngineConfig(tmp_path))
    (missing,) = engine.missing_assets()  # type: ignore[attr-defined]
    assert missing.capability == "voices" and "54" in missing.what
    assert str(tmp_path) in missing.log_line() and "fetch_voice_packs" in missing.log_line()
    assert str(tmp_path) not in str(missing.status())  # /readyz shows no paths


def test_no_tool_or_test_reads_a_models_folder_of_its_own() -> None:
    # Benchmarks, studies, scripts and tests find models as the product does
    # (Settings().models_dir, or tests/installed_models.py): four of them read
    # ~/.cache/voxclone/models, which a fresh install leaves empty, so the
    # clone benchmark measured an engine without Kokoro's extra voice packs
    # and three engine tests assembled a second model there.
    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r'"\.cache"\s*\)?\s*/\s*"voxclone"\s*/\s*"models"')
    offenders = [
        str(path.relative_to(root))
        for folder in ("bench", "studies", "scripts", "tests", "src")
        for path in (root / folder).rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
