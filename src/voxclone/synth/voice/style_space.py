"""A low-dimensional coordinate system for a style engine's style space.

A Kokoro style pack is [510, 1, 256]: one 256-d vector per sequence length
(another style engine's packs are [rows, 1, dims], split at dims / 2 alike).
Dims 0–127 drive timbre (what a speaker encoder hears), dims 128–255 drive
prosody (pitch, durations). Measured on this model, the two halves can be set
independently, so a voice is described by a :class:`VoiceRecipe`:

* timbre half = blend of the basis packs' timbre halves (affine weights)
  plus a delta along a few *directions*; the same delta is added to all 510
  rows, which keeps the length-dependent structure of the packs intact;
* prosody half = blend of the basis packs' prosody halves (chosen to match
  a target's pitch).

The basis packs are the engine's ``atlas_packs()``: the five the model's PyPI
packages ship and, when installed, the model's other 49
(engine/kokoro/voice_packs.py).

The directions are the principal directions of how the five shipped packs
differ from each other (row by row) plus a few seeded random directions shaped like
that spread, because the five packs alone span only four dimensions and a
cloner needs more room than that. Everything is deterministic from the packs
and the seed, and the directions are also stored in the atlas file so that
an atlas stays valid even if this construction changes (the atlas extended
onto the other 49 packs keeps the five-pack directions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

# Kokoro's halves; another engine's packs split the same way at their own
# width (StyleBasis.timbre / .prosody).
TIMBRE = slice(0, 128)
PROSODY = slice(128, 256)
HALF_DIMS = 128


@dataclass(frozen=True)
class VoiceRecipe:
    """Coordinates of one voice in a :class:`StyleBasis`."""

    timbre_weights: np.ndarray  # [P], sums to 1 (may be negative: extrapolation)
    timbre_coeffs: np.ndarray  # [K], in units of each direction's scale
    prosody_weights: np.ndarray  # [P], sums to 1

    def with_timbre_coeffs(self, coeffs: np.ndarray) -> VoiceRecipe:
        return VoiceRecipe(
            self.timbre_weights, np.asarray(coeffs, np.float32), self.prosody_weights
        )

    def with_prosody(self, weights: np.ndarray) -> VoiceRecipe:
        return VoiceRecipe(self.timbre_weights, self.timbre_coeffs, np.asarray(weights, np.float32))


@dataclass(frozen=True)
class StyleBasis:
    pack_names: tuple[str, ...]
    packs: np.ndarray  # [P, rows, dims] float32 (Kokoro: [P, 510, 256])
    directions: np.ndarray  # [K, dims / 2] float32, each scaled to one "typical step"

    @property
    def n_packs(self) -> int:
        return len(self.pack_names)

    @property
    def timbre(self) -> slice:
        return slice(0, self.packs.shape[-1] // 2)

    @property
    def prosody(self) -> slice:
        return slice(self.packs.shape[-1] // 2, self.packs.shape[-1])

    @property
    def n_directions(self) -> int:
        return int(self.directions.shape[0])

    def timbre_half(self, weights: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
        """[rows, dims / 2] timbre rows for blend ``weights`` plus the direction delta."""
        w = _normalized(weights)
        rows = np.tensordot(w, self.packs[:, :, self.timbre], axes=1)
        delta = np.asarray(coeffs, np.float32) @ self.directions
        return (rows + delta[None, :]).astype(np.float32)

    def prosody_half(self, weights: np.ndarray) -> np.ndarray:
        w = _normalized(weights)
        return np.tensordot(w, self.packs[:, :, self.prosody], axes=1).astype(np.float32)

    def pack(self, recipe: VoiceRecipe) -> np.ndarray:
        """The [rows, 1, dims] style pack the engine consumes."""
        timbre = self.timbre_half(recipe.timbre_weights, recipe.timbre_coeffs)
        prosody = self.prosody_half(recipe.prosody_weights)
        return np.concatenate([timbre, prosody], axis=1)[:, None, :]

    def recipe_for_pack(self, name: str) -> VoiceRecipe:
        """The recipe that reproduces one shipped pack exactly."""
        onehot = np.zeros(self.n_packs, np.float32)
        onehot[self.pack_names.index(name)] = 1.0
        return VoiceRecipe(onehot, np.zeros(self.n_directions, np.float32), onehot.copy())


def _normalized(weights: np.ndarray) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum()
    if abs(total) < 1e-6:
        raise ValueError("blend weights must not sum to zero")
    return (w / total).astype(np.float32)


def build_basis(
    packs: Mapping[str, np.ndarray], *, n_random: int = 12, seed: int = 0, n_principal: int = 4
) -> StyleBasis:
    """Derive directions from the shipped packs (deterministic for a seed)."""
    names = tuple(sorted(packs))
    stacked = _stacked(names, packs)
    half = stacked.shape[-1] // 2
    timbre = stacked[:, :, :half].astype(np.float64)  # [P, rows, half]
    # How packs differ from the mean pack at the same row (length).
    spread = (timbre - timbre.mean(axis=0, keepdims=True)).reshape(-1, half)
    _, singular, vt = np.linalg.svd(spread, full_matrices=False)
    n_principal = min(n_principal, len(names) - 1)
    scales = singular[:n_principal] / np.sqrt(spread.shape[0])
    principal = vt[:n_principal] * scales[:, None]
    # SVD signs are arbitrary; fix them so the basis is reproducible everywhere.
    for i in range(n_principal):
        if principal[i, np.argmax(np.abs(principal[i]))] < 0:
            principal[i] = -principal[i]
    per_dim = spread.std(axis=0)
    rng = np.random.default_rng(seed)
    random_dirs = rng.standard_normal((n_random, half)) * per_dim[None, :]
    # Orthogonal to the principal subspace, so they add new room.
    q, _ = np.linalg.qr(vt[:n_principal].T)
    random_dirs -= (random_dirs @ q) @ q.T
    target_norm = 0.5 * float(np.linalg.norm(scales))
    random_dirs *= target_norm / np.linalg.norm(random_dirs, axis=1, keepdims=True)
    directions = np.concatenate([principal, random_dirs]).astype(np.float32)
    return StyleBasis(names, stacked.astype(np.float32), directions)


def basis_from_arrays(
    names: tuple[str, ...], packs: Mapping[str, np.ndarray], directions: np.ndarray
) -> StyleBasis:
    return StyleBasis(names, _stacked(names, packs), np.asarray(directions, np.float32))


def _stacked(names: tuple[str, ...], packs: Mapping[str, np.ndarray]) -> np.ndarray:
    """[P, rows, dims]: each pack [rows, 1, dims] or [rows, dims] (all alike)."""
    arrays = [np.asarray(packs[n], np.float32) for n in names]
    dims = arrays[0].shape[-1]
    if dims % 2:
        raise ValueError("a style pack needs an even width: a timbre and a prosody half")
    return np.stack([a.reshape(-1, dims) for a in arrays])


def sample_recipe(
    rng: np.random.Generator,
    n_packs: int,
    n_directions: int,
    *,
    anchor: int | None = None,
    anchor_min: float = 0.4,
) -> VoiceRecipe:
    """A random, diverse recipe for the atlas.

    Sparse Dirichlet blends reach the corners (single packs) as well as the
    middle; a random step size per voice mixes near-pack voices with far
    excursions along the directions.

    With ``anchor`` (a pack index), the voice leans towards that pack: at
    least ``anchor_min`` of its timbre blend and at least half of its prosody
    blend come from it. Only one of the five shipped packs is male, so an
    unanchored sampler yields almost no low-pitched, male-sounding voices; the
    atlas builder anchors part of the voices on the male pack to balance that.
    """
    timbre_w = rng.dirichlet(np.full(n_packs, 0.5))
    step = rng.uniform(0.0, 1.5)
    coeffs = rng.standard_normal(n_directions) * step
    prosody_w = rng.dirichlet(np.full(n_packs, 0.5))
    if anchor is not None:
        timbre_w = _lean_towards(timbre_w, anchor, rng.uniform(anchor_min, 1.0))
        prosody_w = _lean_towards(prosody_w, anchor, rng.uniform(0.5, 1.0))
    return VoiceRecipe(
        timbre_w.astype(np.float32), coeffs.astype(np.float32), prosody_w.astype(np.float32)
    )


def _lean_towards(weights: np.ndarray, anchor: int, share: float) -> np.ndarray:
    """``weights`` rescaled so that pack ``anchor`` holds at least ``share`` of the blend."""
    others = np.array(weights, np.float64)
    others[anchor] = 0.0
    total = others.sum()
    rest = others / total if total > 0 else np.zeros_like(others)
    out = (1.0 - share) * rest
    out[anchor] += share
    return out


def sample_same_sex_recipe(
    rng: np.random.Generator,
    pool: np.ndarray,
    n_packs: int,
    n_directions: int,
    *,
    max_step: float = 0.6,
) -> VoiceRecipe:
    """A random voice made of 1-3 packs of ``pool`` (indices of packs of one sex)
    for the timbre half and 1-2 of them for the prosody half, with a small step
    along the directions. With 20 male packs (npm kokoro-js) there is no need to
    anchor on one male pack, and blending across sexes made voices no speaker
    has; the step stays small because the packs themselves are the diversity
    (the five-pack sampler needs steps up to 1.5 for that)."""
    timbre_w = np.zeros(n_packs, np.float32)
    chosen = rng.choice(pool, size=int(rng.integers(1, min(3, len(pool)) + 1)), replace=False)
    timbre_w[chosen] = rng.dirichlet(np.ones(len(chosen)))
    prosody_w = np.zeros(n_packs, np.float32)
    chosen = rng.choice(pool, size=int(rng.integers(1, min(2, len(pool)) + 1)), replace=False)
    prosody_w[chosen] = rng.dirichlet(np.ones(len(chosen)))
    coeffs = rng.standard_normal(n_directions) * rng.uniform(0.0, max_step)
    return VoiceRecipe(timbre_w, coeffs.astype(np.float32), prosody_w)
