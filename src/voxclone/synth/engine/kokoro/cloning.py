"""What Kokoro gives the cloner (``Engine.cloning``): the atlas measured offline
on its packs (scripts/build_atlas.py), the pick's weights and cue table fitted
on that atlas (studies/fit_pick_weights.py), its comparison voices (the standard
voices when installed, else the earlier seven), the probe language, and the
differentiable copy's builder for the deep refine where torch and Kokoro's
model code are installed (the ``[deep]`` extra).

The files live beside the cloner (``voxclone.synth.voice/data``), where the
benchmarks that load Kokoro's atlas directly find them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from voxclone.synth.engine.base import StyleCloning


def _shipped(name: str) -> Path:
    return Path(str(resources.files("voxclone.synth.voice") / "data" / name))


def kokoro_cloning(
    packs: Mapping[str, np.ndarray],
    *,
    model_path: Path | None = None,
    vocab: dict[str, int] | None = None,
) -> StyleCloning:
    """``packs``: the engine's atlas packs (shipped and, if installed, the other 49);
    ``model_path`` and ``vocab``: the engine's ONNX model, which the deep
    refine's differentiable copy is built from (torch_model.py)."""
    from voxclone.synth.engine.kokoro.builtin_voices import catalog_comparison

    differentiable: partial[object] | None = None
    missing: str | None = "the engine's model file is not known"
    if model_path is not None and vocab is not None:
        missing = differentiable_missing()
        if missing is None:
            differentiable = partial(_build_copy, model_path, dict(vocab))
    return StyleCloning(
        packs,
        atlas=_shipped("atlas.npz"),
        pick_weights=_shipped("pick_weights.json"),
        cues=_shipped("atlas_cues.npz"),  # none shipped today: the pick without cues
        comparison=catalog_comparison(packs),
        probe_language="en-us",
        differentiable=differentiable,
        differentiable_missing=missing,
    )


def differentiable_missing() -> str | None:
    """What this install lacks for the differentiable copy (None: nothing).
    Looked up, not imported: torch takes seconds to import, and serving never
    needs it."""
    from voxclone.synth.engine.kokoro.torch_model import INSTALL_HINT

    lacking = [m for m in ("torch", "kokoro", "transformers") if find_spec(m) is None]
    if lacking:
        return f"{', '.join(lacking)} not installed: {INSTALL_HINT}"
    return None


def _build_copy(model_path: Path, vocab: dict[str, int]) -> object:
    from voxclone.synth.engine.kokoro.torch_model import build_torch_kokoro

    return build_torch_kokoro(model_path, vocab)
