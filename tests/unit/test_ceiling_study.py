"""The choosing parts of studies/ceiling.py on hand-made inputs.

The study's synthesis pass needs the models and the evaluation audio; which
speakers it may read (never the test split), which ranks of the top 200 it
keeps, and how each candidate set's choices are read are checked here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # the study imports clone_eval from there
sys.path.insert(0, str(ROOT / "studies"))

import ceiling  # noqa: E402


def _entries(count: int, sex: str) -> list[dict[str, Any]]:
    return [{"file": f"x{i}.wav", "sex": sex, "duration_s": 5.0} for i in range(count)]


def test_the_test_split_is_refused() -> None:
    with pytest.raises(SystemExit):
        ceiling.chosen_speakers(["fit", "test"], {"vctk-p225": _entries(5, "F")})


def test_only_split_members_with_two_recordings_and_a_known_sex() -> None:
    by_speaker = {
        "vctk-p226": _entries(2, "M"),  # fit, kept
        "nst_sv-se10x016": _entries(3, "unknown"),  # fit, sex unknown
        "librispeech-8230": _entries(1, "M"),  # fit, one recording
        "vctk-p225": _entries(5, "F"),  # test split
        "vctk-p228": _entries(5, "F"),  # validation
        "librispeech-198": _entries(2, "F"),  # validation
    }
    assert ceiling.chosen_speakers(["fit"], by_speaker) == ["vctk-p226"]
    # Validation follows fit, in the study's written order (women first).
    assert ceiling.chosen_speakers(["fit", "validation"], by_speaker) == [
        "vctk-p226",
        "vctk-p228",
        "librispeech-198",
    ]


def test_top200_subsample_keeps_the_top50_and_spreads_the_rest() -> None:
    kept = ceiling.top200_ranks(200, 30)
    assert kept[:50] == list(range(50))
    rest = kept[50:]
    assert len(rest) == 30 and rest[0] == 50 and rest[-1] == 199
    assert rest == sorted(set(rest))
    assert ceiling.top200_ranks(200, 0) == list(range(200))
    assert ceiling.top200_ranks(120, 100) == list(range(120))  # nothing to cut


def _cand(label: str, norm: float, judge_ref: float, heard: float, *sets: str) -> dict[str, Any]:
    return {
        "label": label,
        "sets": list(sets),
        "norm": norm,
        "judge_ref": judge_ref,
        "heard": heard,
    }


def test_each_choice_reads_only_its_own_signal() -> None:
    cands = [
        _cand("a", 0.9, 0.1, 0.2, "top10", "top50"),  # best on held-out audio
        _cand("b", 0.3, 0.8, 0.1, "top50"),  # the judge hears it closest to the reference
        _cand("c", 0.1, 0.2, 0.9, "top50", "random"),  # the product encoder's choice
    ]
    summary = ceiling.summarize(cands, pick_norm=0.2)
    top50 = summary["top50"]
    assert (top50["best_label"], top50["best_norm"]) == ("a", 0.9)
    assert (top50["listener_label"], top50["listener_norm"]) == ("b", 0.3)
    assert (top50["encoder_label"], top50["encoder_norm"]) == ("c", 0.1)
    assert top50["n"] == 3 and top50["share_above_pick"] == pytest.approx(2 / 3)
    assert summary["top10"]["n"] == 1 and "packs" not in summary
    assert summary["all"]["n"] == 3
