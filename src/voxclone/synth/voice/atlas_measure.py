"""An atlas measured on the fly for a style engine that ships only its packs.

Kokoro's atlas is built offline (scripts/build_atlas.py: 1,300 voices, ASR
included) and shipped. An engine that hands the cloner nothing but packs
(``StyleCloning.atlas`` None) gets a small one at its first start instead:
every pack as it is (labelled with its name, so the WER gate and the built-in
margin treat it as the engine's own voice), then seeded random recipes
(:func:`~voxclone.synth.voice.style_space.sample_recipe`), each rendered on the
probe sentences and measured the way the offline build measures: speaker
embedding of the clips, median F0. No ASR (a WER column of NaN counts as
neutral), so a start costs renders and embeddings only. The result is written
under models_dir keyed by everything it depends on, so later starts only read
it.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import soxr

from voxclone.errors import ModelAssetError
from voxclone.synth.voice.atlas import SUPPORTED_FORMAT
from voxclone.synth.voice.prosody import pitch_stats
from voxclone.synth.voice.style_space import build_basis, sample_recipe

log = logging.getLogger(__name__)

ENCODER_RATE = 16_000
# Random voices per pack, and at most: enough neighbours for the blend
# (clone.BLEND_VOICES) and the pitch gate to choose among, few enough that a
# first start renders for seconds, not minutes (2 sentences per voice).
RANDOM_PER_PACK = 6
MAX_RANDOM = 60
SEED = 0
# Bump when what is measured changes: cached atlases of older versions are ignored.
MEASURE_VERSION = 1

# A style pack -> the probe sentences spoken with it, at the engine's rate.
RenderFn = Callable[[np.ndarray], Sequence[np.ndarray]]
# 16 kHz clips of one voice -> its speaker embedding.
EmbedFn = Callable[[list[np.ndarray]], np.ndarray]


def random_voices(n_packs: int) -> int:
    return min(MAX_RANDOM, RANDOM_PER_PACK * n_packs)


def measure_atlas(
    packs: Mapping[str, np.ndarray],
    render: RenderFn,
    sample_rate: int,
    embed: EmbedFn,
    *,
    n_random: int | None = None,
    seed: int = SEED,
) -> dict[str, np.ndarray]:
    """The atlas columns (scripts/build_atlas.py's format) of ``packs``."""
    if len(packs) < 2:
        raise ModelAssetError("style cloning needs at least two style packs to search between")
    basis = build_basis(packs, seed=seed)
    count = random_voices(basis.n_packs) if n_random is None else n_random
    rng = np.random.default_rng(seed)
    recipes = [basis.recipe_for_pack(name) for name in basis.pack_names]
    recipes += [sample_recipe(rng, basis.n_packs, basis.n_directions) for _ in range(count)]
    embeddings, f0 = [], []
    started = time.perf_counter()
    for recipe in recipes:
        clips = [np.asarray(c, np.float32) for c in render(basis.pack(recipe))]
        clips16 = [soxr.resample(c, sample_rate, ENCODER_RATE).astype(np.float32) for c in clips]
        embeddings.append(np.asarray(embed(clips16), np.float32))
        f0.append(pitch_stats(np.concatenate(clips), sample_rate).median_hz)
    log.info(
        "voice atlas measured on the engine's packs",
        extra={"voices": len(recipes), "seconds": round(time.perf_counter() - started, 2)},
    )
    return {
        "format_version": np.array(SUPPORTED_FORMAT),
        "seed": np.array(seed),
        "pack_names": np.array(basis.pack_names),
        "directions": basis.directions,
        "timbre_weights": np.stack([r.timbre_weights for r in recipes]),
        "timbre_coeffs": np.stack([r.timbre_coeffs for r in recipes]),
        "prosody_weights": np.stack([r.prosody_weights for r in recipes]),
        "labels": np.array([*basis.pack_names, *([""] * count)]),
        "embeddings": np.stack(embeddings),
        "f0_median": np.array(f0, np.float32),
        "wer": np.full(len(recipes), np.nan, np.float32),
    }


def atlas_key(identity: str, packs: Mapping[str, np.ndarray], sentences: Sequence[str]) -> str:
    """What a measured atlas depends on: the engine's weights, its packs, the
    sentences heard, this module's recipe."""
    digest = hashlib.sha256(f"{MEASURE_VERSION}|{SEED}|{identity}".encode())
    for name in sorted(packs):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(packs[name], dtype=np.float32).tobytes())
    for sentence in sentences:
        digest.update(sentence.encode())
    return digest.hexdigest()[:20]


def cached_atlas(
    directory: Path, key: str, measure: Callable[[], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """The atlas stored under ``key`` in ``directory``, else ``measure()``'s,
    stored there (atomically) for the next start."""
    path = directory / f"atlas-{key}.npz"
    try:
        return dict(np.load(path, allow_pickle=False))
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        log.warning("a cached voice atlas could not be read; measuring again", exc_info=True)
    data = measure()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, **data)  # type: ignore[arg-type]  # numpy stub quirk
        tmp.replace(path)
    except OSError:
        log.warning("the measured voice atlas could not be cached", exc_info=True)
    return data
