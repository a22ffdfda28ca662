"""The voice atlas: synthetic voices with known recipes and measured embeddings.

Built offline by ``scripts/build_atlas.py`` and shipped as a small ``.npz``
(recipes, basis directions, embeddings, F0, WER; no packs). Regression from
embedding to style failed in the prototype (too little data), while the
nearest neighbour in a library of synthesized voices worked, so instant
cloning is a lookup here.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from voxclone.errors import ModelAssetError
from voxclone.synth.voice.prosody import choose_prosody
from voxclone.synth.voice.style_space import StyleBasis, VoiceRecipe, basis_from_arrays

SUPPORTED_FORMAT = 1


@dataclass(frozen=True)
class AtlasMatch:
    index: int
    similarity: float  # cosine of speaker embeddings


class VoiceAtlas:
    def __init__(
        self,
        basis: StyleBasis,
        *,
        timbre_weights: np.ndarray,
        timbre_coeffs: np.ndarray,
        prosody_weights: np.ndarray,
        embeddings: np.ndarray,
        f0_median: np.ndarray,
        wer: np.ndarray,
    ) -> None:
        n = embeddings.shape[0]
        if n == 0:
            raise ModelAssetError("the voice atlas is empty")
        for name, arr in (
            ("timbre_weights", timbre_weights),
            ("timbre_coeffs", timbre_coeffs),
            ("prosody_weights", prosody_weights),
            ("f0_median", f0_median),
            ("wer", wer),
        ):
            if arr.shape[0] != n:
                raise ModelAssetError(f"voice atlas column {name} has the wrong length")
        self.basis = basis
        self._timbre_w = timbre_weights.astype(np.float32)
        self._coeffs = timbre_coeffs.astype(np.float32)
        self._prosody_w = prosody_weights.astype(np.float32)
        norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
        self.embeddings = (embeddings / np.maximum(norms, 1e-9)).astype(np.float32)
        self.f0_median = f0_median.astype(np.float32)
        # Unknown WER (atlas built without ASR) counts as neutral.
        self.wer = np.nan_to_num(wer.astype(np.float32), nan=0.0)

    def __len__(self) -> int:
        return int(self.embeddings.shape[0])

    @classmethod
    def load(cls, packs: dict[str, np.ndarray], path: Path | None = None) -> VoiceAtlas:
        """Load the shipped atlas (or ``path``), rebuilding packs from ``packs``."""
        try:
            if path is None:
                ref = resources.files("voxclone.synth.voice") / "data" / "atlas.npz"
                with resources.as_file(ref) as shipped:
                    data = dict(np.load(shipped, allow_pickle=False))
            else:
                data = dict(np.load(path, allow_pickle=False))
        except (OSError, ValueError) as exc:
            raise ModelAssetError("the voice atlas could not be read") from exc
        if int(data["format_version"]) != SUPPORTED_FORMAT:
            raise ModelAssetError("the voice atlas has an unsupported format version")
        names = tuple(str(n) for n in data["pack_names"])
        missing = [n for n in names if n not in packs]
        if missing:
            raise ModelAssetError("the voice atlas needs Kokoro packs that are not installed")
        basis = basis_from_arrays(names, packs, data["directions"])
        return cls(
            basis,
            timbre_weights=data["timbre_weights"],
            timbre_coeffs=data["timbre_coeffs"],
            prosody_weights=data["prosody_weights"],
            embeddings=data["embeddings"],
            f0_median=data["f0_median"],
            wer=data["wer"],
        )

    def recipe(self, index: int) -> VoiceRecipe:
        return VoiceRecipe(self._timbre_w[index], self._coeffs[index], self._prosody_w[index])

    def nearest(
        self, embedding: np.ndarray, k: int = 1, *, max_wer: float | None = None
    ) -> list[AtlasMatch]:
        """The ``k`` most similar atlas voices, optionally only intelligible ones."""
        query = np.asarray(embedding, np.float32)
        query = query / max(float(np.linalg.norm(query)), 1e-9)
        sims = self.embeddings @ query
        if max_wer is not None and (self.wer <= max_wer).any():
            sims = np.where(self.wer <= max_wer, sims, -np.inf)
        order = np.argsort(-sims, kind="stable")[:k]
        return [AtlasMatch(int(i), float(sims[i])) for i in order if np.isfinite(sims[i])]

    def blended_timbre(self, matches: list[AtlasMatch], temperature: float) -> VoiceRecipe:
        """Similarity-weighted (softmax) blend of the matches' timbre recipes.

        The pack is linear in the recipe, so blending recipes is blending the
        timbre halves. The prosody half is left at the best match's.
        """
        sims = np.array([m.similarity for m in matches], np.float64)
        weights = np.exp((sims - sims.max()) / max(temperature, 1e-6))
        weights /= weights.sum()
        idx = [m.index for m in matches]
        timbre_w = (weights[:, None] * self._timbre_w[idx]).sum(axis=0)
        coeffs = (weights[:, None] * self._coeffs[idx]).sum(axis=0)
        return VoiceRecipe(
            timbre_w.astype(np.float32), coeffs.astype(np.float32), self._prosody_w[idx[0]]
        )

    def prosody_for_pitch(self, target_hz: float, *, wer_weight: float = 1.0) -> np.ndarray:
        """Prosody blend weights of the atlas voice whose pitch best fits ``target_hz``."""
        index = choose_prosody(target_hz, self.f0_median, self.wer, wer_weight=wer_weight)
        return self._prosody_w[index].copy()
