"""What Kokoro gives the cloner (``Engine.cloning``): the atlas measured offline
on its packs (scripts/build_atlas.py), the pick's weights and cue table fitted
on that atlas (studies/fit_pick_weights.py), its comparison voices (the standard
voices when installed, else the earlier seven) and the probe language.

The files live beside the cloner (``voxclone.synth.voice/data``), where the
benchmarks that load Kokoro's atlas directly find them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import numpy as np

from voxclone.synth.engine.base import StyleCloning


def _shipped(name: str) -> Path:
    return Path(str(resources.files("voxclone.synth.voice") / "data" / name))


def kokoro_cloning(packs: Mapping[str, np.ndarray]) -> StyleCloning:
    """``packs``: the engine's atlas packs (shipped and, if installed, the other 49)."""
    from voxclone.synth.engine.kokoro.builtin_voices import catalog_comparison

    return StyleCloning(
        packs,
        atlas=_shipped("atlas.npz"),
        pick_weights=_shipped("pick_weights.json"),
        cues=_shipped("atlas_cues.npz"),  # none shipped today: the pick without cues
        comparison=catalog_comparison(packs),
        probe_language="en-us",
    )
