"""``voxclone models`` asks each engine's package (issue 39): an engine that
voxclone does not know, found through the registry, lists and imports its
own models with no line of the CLI naming it."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from voxclone.api.cli import main
from voxclone.synth.engine import registry
from voxclone.synth.engine.models import managers

TOY = "toy-tts"
MODULE = "voxclone_toy_models_engine"  # unique: it goes on sys.path

_SOURCE = """
from pathlib import Path

from voxclone.synth.engine.models import InstalledModel, ModelInfo


def create(config):
    raise AssertionError("voxclone models never builds an engine")


class ToyModels:
    engine = "toy-tts"
    imports = True

    def installed(self, models_dir):
        found = sorted((models_dir / "toy-tts").glob("*.bin"))
        return [
            ModelInfo("toy-tts", p.stem, "1", p.stat().st_size, "CC0", ("en-us",), "imported")
            for p in found
        ]

    def import_model(self, source, models_dir, *, config=None):
        target = models_dir / "toy-tts" / f"{config or source.stem}.bin"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        return InstalledModel("toy-tts", target.stem, target.stat().st_size, 1, ("en-us",),
                              {"weights": "CC0"})

    def pull(self, config, models_dir, *, timeout):
        raise OSError(28, "No space left on device")


def model_manager():
    return ToyModels()
"""


@pytest.fixture()
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A plug-in engine with a model manager, and a home to install into."""
    code = tmp_path / "code"
    code.mkdir()
    (code / f"{MODULE}.py").write_text(textwrap.dedent(_SOURCE))
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.setattr(registry, "_plugins", lambda: {TOY: f"{MODULE}:create"})
    monkeypatch.setenv("VOXCLONE_HOME", str(tmp_path / "home"))
    # Models live apart from the home since issue 46 (models_location.py).
    monkeypatch.setenv("VOXCLONE_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.delenv("VOXCLONE_DATABASE_URL", raising=False)
    yield tmp_path
    sys.modules.pop(MODULE, None)


def test_each_builtin_engine_has_a_manager_in_registry_order() -> None:
    found = {m.engine: m.imports for m in managers()}
    assert list(found)[:2] == ["kokoro", "pocket-tts"]
    assert found["kokoro"] is False and found["pocket-tts"] is True
    assert registry.model_manager("no-such-engine") is None


def test_a_plug_in_engine_imports_and_lists_its_own_models(
    toy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weights = toy / "voice.bin"
    weights.write_bytes(b"\0" * 2048)
    assert main(["models", "import", TOY, str(weights), "--config", "small"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == (
        "installed toy-tts model 'small' (2.0 KB, 1 files, SHA-256 verified; "
        "languages en-us; license weights CC0)"
    )
    assert (toy / "models" / TOY / "small.bin").read_bytes() == weights.read_bytes()
    assert main(["models", "list"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[0] for r in rows[1:]] == ["kokoro", TOY]
    assert rows[2].split()[1:4] == ["small", "2.0", "KB"]


def test_a_plug_in_engine_is_named_among_those_that_import(
    toy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "import", "kokoro", str(toy)]) == 2
    err = capsys.readouterr().err
    assert "takes no imported models; these do: pocket-tts, toy-tts" in err


def test_a_failed_write_of_a_plug_in_model_is_one_line(
    toy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "pull", TOY, "--timeout", "1"]) == 1  # the host's fault, not usage
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "voxclone: error: cannot install the model: No space left on device"
