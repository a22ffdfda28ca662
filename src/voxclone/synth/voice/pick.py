"""The instant pick's objective: which atlas voice a reference is cloned into.

The product encoder's nearest voice alone often did not carry over to an
independent listener (bench/results/pick_study.md). So the nearest ``pool``
voices by encoder cosine (pitch- and WER-gated, plus every eligible built-in)
are re-ranked by a score built from several cues that each predict identity
on real speech:

    score = cosine
            - w_f0       * |octaves between median F0s|
            - w_range    * |difference of F0 ranges (10th-90th pct, octaves)|
            - w_spectrum * RMS difference of long-term spectra, 100-7000 Hz (dB / 10)
            - w_rate     * |log2 ratio of speaking rates|
            + builtin_margin * (voice is a built-in)

The atlas side of the cues is measured once, offline, on each atlas voice's
test sentences (``atlas_cues.npz``); the weights come from
``pick_weights.json``. Both are written by ``studies/fit_pick_weights.py``,
which chooses the weights by leave-one-speaker-out cross-validation on the
dev speakers (the JSON records the command and the cross-validated figure).
With every cue weight at 0 the score is the old pick: cosine plus the
built-in margin.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from voxclone.synth.audio.tone import GRID_HZ
from voxclone.synth.voice.prosody import PitchStats

CUES = ("f0", "range", "spectrum", "rate")
SPECTRUM_BAND_HZ = (100.0, 7000.0)
_LOW_HZ, _HIGH_HZ = SPECTRUM_BAND_HZ
_BAND = (GRID_HZ >= _LOW_HZ) & (GRID_HZ <= _HIGH_HZ)


@dataclass(frozen=True)
class PickWeights:
    f0: float = 0.0
    range: float = 0.0
    spectrum: float = 0.0
    rate: float = 0.0
    builtin_margin: float = 0.05
    pool: int = 30  # nearest voices by encoder cosine that the score re-ranks

    @property
    def uses_cues(self) -> bool:
        return any(getattr(self, cue) != 0.0 for cue in CUES)

    def to_json(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class ReferenceCues:
    """The reference side of the cues (from the voice print)."""

    pitch: PitchStats
    spectrum: np.ndarray | None
    rate: float  # prosody.speaking_rate; 0.0 = unknown


@dataclass(frozen=True)
class AtlasCues:
    """Per atlas voice: F0 10th/90th percentiles, long-term spectrum, speaking rate."""

    f0_low: np.ndarray
    f0_high: np.ndarray
    spectrum: np.ndarray  # [n, len(GRID_HZ)] dB, NaN rows where unmeasured
    rate: np.ndarray

    def __len__(self) -> int:
        return int(self.rate.shape[0])

    @classmethod
    def load(cls, path: Path | None = None) -> AtlasCues | None:
        """The shipped cue table (or ``path``); None when there is none."""
        try:
            if path is None:
                ref = resources.files("voxclone.synth.voice") / "data" / "atlas_cues.npz"
                with resources.as_file(ref) as shipped:
                    if not shipped.exists():
                        return None
                    data = dict(np.load(shipped, allow_pickle=False))
            else:
                data = dict(np.load(path, allow_pickle=False))
        except (OSError, ValueError):
            return None
        return cls(
            f0_low=data["f0_low"].astype(np.float32),
            f0_high=data["f0_high"].astype(np.float32),
            spectrum=data["spectrum"].astype(np.float32),
            rate=data["rate"].astype(np.float32),
        )


def _octaves(a: np.ndarray, b: float) -> np.ndarray:
    ok = (a > 0) & (b > 0)
    return np.where(ok, np.abs(np.log2(np.where(ok, a, 1.0) / (b if b > 0 else 1.0))), 0.0)


def cue_distances(
    indices: np.ndarray, f0_median: np.ndarray, cues: AtlasCues, ref: ReferenceCues
) -> dict[str, np.ndarray]:
    """Distance of each atlas voice in ``indices`` to the reference, per cue.

    A cue that cannot be measured on either side counts as distance 0 (neutral)."""
    idx = np.asarray(indices, dtype=np.int64)
    out = {"f0": _octaves(f0_median[idx].astype(np.float64), ref.pitch.median_hz)}
    low, high = cues.f0_low[idx].astype(np.float64), cues.f0_high[idx].astype(np.float64)
    ok = (low > 0) & (high > 0)
    voice_range = np.where(ok, np.log2(np.where(ok, high, 1.0) / np.where(ok, low, 1.0)), 0.0)
    ref_range = ref.pitch.range_octaves
    out["range"] = np.where(ok & (ref_range > 0), np.abs(voice_range - ref_range), 0.0)
    if ref.spectrum is not None:
        diff = cues.spectrum[idx][:, _BAND].astype(np.float64) - ref.spectrum[_BAND]
        # Level-free shape: the mean difference is a gain the tone match removes anyway.
        diff -= np.nanmean(diff, axis=1, keepdims=True)
        rms = np.sqrt(np.nanmean(diff**2, axis=1)) / 10.0
        out["spectrum"] = np.nan_to_num(rms, nan=0.0)
    else:
        out["spectrum"] = np.zeros(idx.size)
    out["rate"] = _octaves(cues.rate[idx].astype(np.float64), ref.rate)
    return out


def pick_scores(
    cosines: np.ndarray,
    distances: dict[str, np.ndarray],
    is_builtin: np.ndarray,
    weights: PickWeights,
) -> np.ndarray:
    score = np.asarray(cosines, np.float64) + weights.builtin_margin * np.asarray(is_builtin)
    for cue in CUES:
        score = score - getattr(weights, cue) * distances[cue]
    return score


def load_weights(path: Path | None = None) -> PickWeights:
    """The shipped weights (``pick_weights.json``), or the old pick when there are none."""
    try:
        if path is None:
            ref = resources.files("voxclone.synth.voice") / "data" / "pick_weights.json"
            text = ref.read_text()
        else:
            text = path.read_text()
    except (OSError, FileNotFoundError):
        return PickWeights()
    data: dict[str, Any] = json.loads(text)
    fields = {k: float(v) for k, v in data["weights"].items() if k in PickWeights.__annotations__}
    if "pool" in fields:
        fields["pool"] = int(fields["pool"])
    return PickWeights(**fields)  # type: ignore[arg-type]
