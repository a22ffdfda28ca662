"""Replay logic of studies/pick_study.py on a hand-made candidate table.

The study's synthesis pass needs the models and the evaluation audio; the
policies are plain functions over its table, so they are checked here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # the study imports clone_eval from there
sys.path.insert(0, str(ROOT / "studies"))

import pick_study  # noqa: E402


def _candidate(index: int, **values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "index": index,
        "label": "",
        "builtin": False,
        "f0": 200.0,
        "atlas_sim": 0.5,
        "atlas_half_sims": [0.5, 0.5],
        "heard_sim": 0.5,
        "heard_half_sims": [0.5, 0.5],
        "judge_norm": 0.0,
    }
    return {**base, **values}


def _row() -> dict[str, Any]:
    candidates = [
        # Best by atlas cosine, but only thanks to one half of the reference.
        _candidate(0, atlas_sim=0.70, atlas_half_sims=[0.80, 0.40], judge_norm=-0.2),
        # Consistent on both halves.
        _candidate(1, atlas_sim=0.66, atlas_half_sims=[0.66, 0.64], judge_norm=0.3),
        # A built-in voice.
        _candidate(2, label="clear_female", builtin=True, atlas_sim=0.62, judge_norm=0.2),
        # Outside the ±25 % pitch window of a 200 Hz reference.
        _candidate(3, f0=120.0, atlas_sim=0.90, judge_norm=0.9, heard_sim=0.9),
        # Heard best: leads candidate 0 by 0.06 in the refine objective.
        _candidate(4, atlas_sim=0.60, heard_sim=0.56, heard_half_sims=[0.56, 0.40], judge_norm=0.5),
    ]
    return {
        "case": "x/dev",
        "kind": "dev",
        "ref_f0": 200.0,
        "speech_s": 10.0,
        "shortlist": [3, 0, 1, 2, 4],
        "alternatives": [3, 0, 1, 2, 4],
        "candidates": candidates,
    }


def test_nearest_keeps_the_pitch_window_and_the_builtin_margin() -> None:
    row = _row()
    assert pick_study.nearest(0.0, pick_study.atlas_full)(row)["index"] == 0
    # 0.62 + 0.10 beats 0.70: the built-in wins with a wide margin.
    assert pick_study.nearest(0.10, pick_study.atlas_full)(row)["index"] == 2
    assert pick_study.nearest(0.0, pick_study.atlas_half_min)(row)["index"] == 1


def test_audition_switches_only_on_a_lead() -> None:
    row = _row()
    start = pick_study.nearest(0.0, pick_study.atlas_full)
    # Candidate 3 is heard best (0.9) but sits in the alternatives: auditions
    # may hear anything refine would hear, so it wins with any small gain.
    assert pick_study.audition(start, 0.05, pick_study.heard_full)(row)["index"] == 3
    row["alternatives"] = [0, 1, 2, 4]
    assert pick_study.audition(start, 0.05, pick_study.heard_full)(row)["index"] == 4
    assert pick_study.audition(start, 0.08, pick_study.heard_full)(row)["index"] == 0
    # By the weaker half, candidate 4 (0.40) is no better than the start (0.5).
    assert pick_study.audition(start, 0.02, pick_study.heard_half_min)(row)["index"] == 0


def test_replay_reports_means_per_kind_and_the_oracle() -> None:
    rows = [_row(), {**_row(), "case": "y/split", "kind": "split"}]
    policies = pick_study.replay(rows)
    oracle = policies["oracle (judge picks; ceiling)"]
    assert oracle["mean_norm"] == {"dev": 0.9, "split": 0.9, "all": 0.9}
    product = policies["nearest m=0.00"]
    assert product["picks"]["x/dev"]["index"] == 0
    assert product["mean_norm"]["all"] == pytest.approx(-0.2)


def test_builtin_margin_grows_as_the_reference_shortens() -> None:
    assert pick_study.margin_for(10.0) == pytest.approx(0.05)
    assert pick_study.margin_for(2.5) == pick_study.margin_for(3.0) > 0.09
    row = _row()
    scaled = pick_study.nearest_scaled(pick_study.atlas_full)
    assert scaled(row)["index"] == 0  # 10 s: margin 0.05, the atlas voice leads by 0.08
    row["speech_s"] = 3.0  # margin 0.091: the built-in wins
    assert scaled(row)["index"] == 2
