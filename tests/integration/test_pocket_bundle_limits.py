"""A bundle whose weights file has a hostile safetensors header, hashes right:
``voxclone models import`` ends with one line, not a traceback (issue 37: a
``1e400`` offset raised OverflowError, a deep header RecursionError).

The bundle is the test-built random-weight Pocket TTS bundle (config and
tokenizer pass the import's structural check, so the header is what is read).
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import pytest

from voxclone.api.cli import main
from voxclone.synth.engine.pocket.bundle import read_manifest, write_manifest

# The random-weight bundle builder is shared with bench/engines_speed.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from pocket_random_bundle import WEIGHTS_FILE, make_random_bundle  # noqa: E402


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pocket-limits") / "tiny"
    make_random_bundle(path, config="tiny", name="tiny", vocab_size=300)
    return path


def _with_header(bundle: Path, dest: Path, header: bytes) -> Path:
    """A copy of ``bundle`` whose weights file carries ``header`` (and a manifest
    that hashes it: only the header itself is wrong)."""
    shutil.copytree(bundle, dest)
    (dest / WEIGHTS_FILE).write_bytes(struct.pack("<Q", len(header)) + header)
    m = read_manifest(dest)
    write_manifest(
        dest,
        engine=m.engine,
        name=m.name,
        version=m.version,
        license=m.license,
        languages=list(m.languages),
    )
    return dest


@pytest.mark.parametrize(
    "header",
    [
        b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 1e400]}}',
        b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, ' + b"[" * 100_000 + b"]}}",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, Infinity]}}',
        b'["not", "a", "map"]',
    ],
    ids=["1e400-offset", "deep-offset", "deep", "infinity", "not-a-map"],
)
def test_a_hostile_weights_header_is_a_one_line_error(
    bundle: Path,
    header: bytes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "home"))
    # Models live apart from the library (models_location.py); the
    # suite points them at a shared session folder, this test at its own.
    monkeypatch.setenv("VOXCLONE_MODELS_DIR", str(tmp_path / "home" / "models"))
    bad = _with_header(bundle, tmp_path / "bad", header)
    capsys.readouterr()
    assert main(["models", "import", "pocket-tts", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"voxclone: error: '{WEIGHTS_FILE}' has a damaged safetensors header"]
    assert not (tmp_path / "home" / "models" / "pocket-tts" / "tiny").exists()


def test_the_untouched_bundle_still_imports(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VOXCLONE_MODELS_DIR", str(tmp_path / "home" / "models"))
    assert main(["models", "import", "pocket-tts", str(bundle)]) == 0
    installed = tmp_path / "home" / "models" / "pocket-tts" / "tiny"
    assert json.loads((installed / "installed.json").read_text())["verified"] == "sha256"
