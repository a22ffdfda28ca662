"""``voxclone voices blend NAME EXPR`` and ``voices delete`` of one of its parts,
in process on a real home (no model is loaded by these commands)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voxclone.api.cli import main
from voxclone.bootstrap import build_library
from voxclone.config import Settings
from voxclone.runtime.voice_store import ConsentRecord, VoiceRecord, utc_now_iso


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path))
    monkeypatch.setenv("VOXCLONE_MEMORY_CACHE_MB", "0")
    return tmp_path


def _part(name: str) -> str:
    library = build_library(Settings())
    try:
        base = library.catalog.resolve("clear_female", None)
        return library.store.create(
            VoiceRecord(
                id="",
                name=name,
                language="en-us",
                owner="local",
                created_at="",
                updated_at="",
                version=1,
                consent=ConsentRecord("cd" * 32, "local", utc_now_iso()),
                embedding=np.ones(256, np.float32),
                style=base.style,
                quality={},
                source="instant",
                engine=base.engine,
                model_id=base.model_id,
            )
        ).id
    finally:
        library.close()


def _names() -> set[str]:
    library = build_library(Settings())
    try:
        return {v.name for v in library.store.list("local")}
    finally:
        library.close()


def test_blend_is_saved_and_deleted_with_its_part(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    part_id = _part("alice")
    assert main(["voices", "blend", "alice and bob", "alice(2)+clear_male(1)"]) == 0
    assert "saved v_" in capsys.readouterr().out
    assert _names() == {"alice", "alice and bob"}

    assert main(["voices", "delete", part_id]) == 0
    out = capsys.readouterr().out
    assert "alice and bob): a saved blend made from it" in out
    assert _names() == set()


def test_bad_blend_is_a_one_line_error(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["voices", "blend", "x", "clear_female(0)+clear_male"]) == 2
    assert "voxclone: error: a voice blend must look like" in capsys.readouterr().err
    assert main(["voices", "blend", "x", "clear_female+nobody"]) == 2
    assert _names() == set()
