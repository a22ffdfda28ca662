"""Serving installs no torch, and a missing model file says how to install it.

The speaker encoder and the VAD run in ONNX Runtime from files that
resemblyzer and silero-vad ship, and the denoiser loads pyrnnoise's library;
those packages' declared dependencies (torch, librosa/numba, matplotlib) made
``make run``'s ``.venv`` 2.9 GB. They are installed without dependencies now
(src/voxclone/synth/asset_packages.py), so a new core dependency that pulls
torch back in, or a pin that drifts from the test extra's, fails here.
"""

from __future__ import annotations

import importlib.util
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from voxclone.errors import ModelAssetError
from voxclone.synth.asset_packages import ASSET_PACKAGES, INSTALL_HINT
from voxclone.synth.audio import denoise, vad
from voxclone.synth.voice import ge2e

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# Large packages serving never imports.
NOT_FOR_SERVING = {"torch", "librosa", "numba", "matplotlib", "pypinyin-dict"}


def _closure(requirements: list[str]) -> set[str]:
    """Names of every installed distribution these requirements pull in (no extras
    beyond the ones named, markers evaluated for this interpreter)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    todo = [r for r in todo if r.marker is None or r.marker.evaluate({"extra": ""})]
    while todo:
        req = todo.pop()  # its marker held for the extra that required it
        name = req.name.lower().replace("_", "-")
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here: nothing to walk
        for extra in sorted(req.extras) or [""]:
            key = f"{name}[{extra}]"
            if key in seen:
                continue
            seen.add(key)
            for sub in dist.requires or []:
                parsed = Requirement(sub)
                if parsed.marker is None or parsed.marker.evaluate({"extra": extra}):
                    todo.append(parsed)
    return {key.split("[")[0] for key in seen}


def test_core_dependencies_pull_in_no_torch() -> None:
    pulled = _closure(PROJECT["dependencies"])
    assert "fastapi" in pulled and "onnxruntime" in pulled  # the walk works
    assert not pulled & NOT_FOR_SERVING, sorted(pulled & NOT_FOR_SERVING)
    assets = {Requirement(p).name for p in ASSET_PACKAGES}
    assert not pulled & assets, "an asset package is a core dependency again (pulls torch)"


def test_the_test_extra_compares_against_the_same_pins() -> None:
    extras = PROJECT["optional-dependencies"]
    for pin in ASSET_PACKAGES:
        assert pin in extras["test"], pin
    for extra in ("test", "pocket", "bench"):
        assert "torch==2.13.0" in extras[extra], extra  # an unpinned torch is a CUDA build


@pytest.mark.parametrize(
    ("finder", "error", "what"),
    [
        (ge2e.shipped_weights, ModelAssetError, "pretrained.pt"),
        (vad._silero_file, ModelAssetError, "silero_vad.onnx"),
        (denoise._library_path, denoise.DenoiserUnavailable, "librnnoise.so"),
    ],
)
def test_a_missing_asset_package_names_the_install_step(
    monkeypatch: pytest.MonkeyPatch, finder: object, error: type[Exception], what: str
) -> None:
    assert callable(finder)
    assert Path(finder()).is_file()  # installed here (make install / the test extra)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    with pytest.raises(error) as caught:
        finder()
    message = str(getattr(caught.value, "message", caught.value))
    assert what in message and "make install" in message, message
    assert INSTALL_HINT in message
    assert "pip install --no-deps resemblyzer==0.1.4 silero-vad==6.2.3 pyrnnoise==0.4.5" in message


def test_an_asset_package_without_its_file_is_missing_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A package directory without the file (another release laid out differently)."""
    spec = importlib.util.spec_from_file_location(
        "resemblyzer", tmp_path / "__init__.py", submodule_search_locations=[str(tmp_path)]
    )
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: spec)
    with pytest.raises(ModelAssetError, match="make install"):
        ge2e.shipped_weights()
    with pytest.raises(ModelAssetError, match="make install"):
        vad._silero_file()
