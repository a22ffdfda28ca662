"""The built-in voices a clone is compared with (the stock check and the quality
report's closest built-in), and how the few worth hearing are chosen.

Which voices: the style engine names them (``StyleCloning.comparison``: atlas
labels or packs -> catalog name, sex, language). Kokoro's
(synth/engine/kokoro/builtin_voices.py ``catalog_comparison``): with its standard voices
installed, the standard voices (the atlas's rows that are exactly one standard
pack: ``af_heart``, ...) but the three Santa Claus character voices, a novelty
no one would take for a person's own voice (the encoder heard am_santa within
0.01 of the clone of two VCTK men whom the judge heard far from it, -0.20 and
-0.25 normalized); without them, the earlier seven (the atlas's labelled
rows). Both sets carry their voices' sex, the standard voices also their
language.

Which of them: only voices of the reference's sex (a female speaker must never
be told that a male voice is her closest built-in: issue 40), of the voice's
language where that language has native voices of that sex; ranked by the
atlas's precomputed embeddings of each voice (no render), so that only the
head of the list (:data:`SHORTLIST`) costs a probe render and a hearing per
enrollment (``StockCheck.heard``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from voxclone.synth.engine.base import ComparisonVoice

if TYPE_CHECKING:
    from voxclone.synth.voice.atlas import VoiceAtlas

# Voices heard by the stock check per enrollment, best-ranked first. Chosen
# with the stock preference (pipeline.STOCK_PREFERENCE) by
# studies/stock_preference.py on the 17 fit and validation speakers: choosing
# both per fold cross-validated at +0.050 normalized over the best toned
# built-in per sex (k=2 in all 17 folds), against +0.012 for the preference
# alone at k=3 and +0.013 with no check; each voice heard costs a probe
# render once per process and ~0.05 s of CPU per enrollment.
SHORTLIST = 2
# The reference's sex from its median F0 where that is unambiguous; between the
# two (low female and high male voices), from which sex's voices its embedding
# lies closer to. On the 38 fit and validation recordings whose manifest gives
# the sex (9 of them inside the band), this rule, the F0 alone (165 Hz) and
# the embedding alone each agreed 37 times; the miss is one clip labelled
# female at a median 111 Hz that every measure hears as male. The F0 alone
# calls a female speaker at 140 Hz male (the report then named clear_male as
# her closest built-in: issue 40).
MALE_BELOW_HZ = 120.0
FEMALE_ABOVE_HZ = 200.0
# A voice of unknown sex (a label the catalog does not describe) by its own F0.
UNKNOWN_MALE_BELOW_HZ = 165.0
# A row is one pack alone when its weights are this close to one-hot.
PURE = 0.999


@dataclass(frozen=True)
class StockVoice:
    index: int  # atlas row
    name: str  # catalog name
    sex: str  # "F" or "M"
    language: str | None  # native language (standard voices), None: unknown


def _base_language(code: str) -> str:
    return code.split("-", 1)[0].lower()


def _pure_pack(atlas: VoiceAtlas, index: int) -> int | None:
    """The pack index when atlas row ``index`` is exactly that one pack."""
    recipe = atlas.recipe(index)
    timbre, prosody = recipe.timbre_weights, recipe.prosody_weights
    k = int(np.argmax(timbre))
    if timbre[k] < PURE or prosody[k] < PURE or float(np.abs(recipe.timbre_coeffs).max()) > 1e-6:
        return None
    return k


class StockVoices:
    """The comparison voices of one atlas (built once per atlas: ``VoiceAtlas.stock``).

    ``comparison`` (the engine's, ``StyleCloning.comparison``) names them: an
    atlas row is a comparison voice when its label, or the one pack it is
    exactly, is a key (the first such row per voice)."""

    def __init__(self, atlas: VoiceAtlas, comparison: Mapping[str, ComparisonVoice]) -> None:
        self._embeddings = atlas.embeddings
        names = atlas.basis.pack_names
        voices: list[StockVoice] = []
        seen: set[str] = set()
        for index in range(len(atlas)):
            spec = comparison.get(str(atlas.labels[index])) if atlas.is_builtin[index] else None
            if spec is None:
                k = _pure_pack(atlas, index)
                spec = None if k is None else comparison.get(names[k])
            if spec is None or spec.name in seen:
                continue
            seen.add(spec.name)
            sex = spec.sex
            if sex not in ("F", "M"):  # unknown: by the voice's own F0
                f0 = float(atlas.f0_median[index])
                sex = "M" if 0 < f0 < UNKNOWN_MALE_BELOW_HZ else "F"
            voices.append(StockVoice(index, spec.name, sex, spec.language))
        self.voices = tuple(voices)
        self._centroids = {
            sex: self._centroid([v.index for v in self.voices if v.sex == sex]) for sex in "FM"
        }

    def _centroid(self, rows: list[int]) -> np.ndarray | None:
        if not rows:
            return None
        mean = self._embeddings[rows].mean(axis=0)
        return mean / max(float(np.linalg.norm(mean)), 1e-9)

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.voices]

    def reference_sex(self, embedding: np.ndarray, pitch_hz: float | None) -> str:
        """The reference's sex, "F" or "M": by its median F0 outside 120-200 Hz,
        else by which sex's voices (their mean embedding) it is closer to."""
        if pitch_hz is not None and pitch_hz > 0:
            if pitch_hz < MALE_BELOW_HZ:
                return "M"
            if pitch_hz > FEMALE_ABOVE_HZ:
                return "F"
        female, male = self._centroids["F"], self._centroids["M"]
        if female is None or male is None:
            return "M" if female is None else "F"
        query = np.asarray(embedding, np.float32)
        return "F" if float(query @ female) >= float(query @ male) else "M"

    def shortlist(
        self,
        embedding: np.ndarray,
        *,
        pitch_hz: float | None = None,
        language: str | None = None,
        k: int = SHORTLIST,
    ) -> list[tuple[StockVoice, float]]:
        """Up to ``k`` (voice, cosine) of the reference's sex, of ``language``
        where it has native voices of that sex, closest (atlas embedding) first."""
        if not self.voices:
            return []
        query = np.asarray(embedding, np.float32)
        query = query / max(float(np.linalg.norm(query)), 1e-9)
        sex = self.reference_sex(query, pitch_hz)
        pool = [v for v in self.voices if v.sex == sex] or list(self.voices)
        if language:
            wanted = _base_language(language)
            native = [v for v in pool if v.language and _base_language(v.language) == wanted]
            pool = native or pool
        sims = self._embeddings[[v.index for v in pool]] @ query
        order = np.argsort(-sims, kind="stable")[:k]
        return [(pool[int(i)], float(sims[int(i)])) for i in order]
