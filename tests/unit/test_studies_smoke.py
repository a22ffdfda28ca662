"""Smoke path of the one-off studies in studies/: they import, and their arithmetic holds.

The studies need the models and the evaluation audio to run; what is checked
here is the part that decides (choices made leave-one-speaker-out, signal
transforms), on hand-made inputs. Timings are never asserted.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# Studies import the benchmarks' helpers (_common, clone_eval, ttfa) from bench/.
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "studies"))

# The studies whose imports need no evaluation data or optional extra.
LIGHT_STUDIES = (
    "variant_cv",
    "ray_overhead",
    "second_request",
    "warmup_sizing",
    "warmup_stalls",
    "langdetect_short",
    "engine_load",
    "stock_preference",
    "stock_listener",
    "stock_check_cost",
    "stock_moved",
    "rate_follow",
    "report_calibration",
    "fit_pick_weights",
)


@pytest.mark.parametrize("name", LIGHT_STUDIES)
def test_study_module_imports(name: str) -> None:
    module = importlib.import_module(name)
    assert callable(module.main)


def test_every_study_is_indexed_in_the_readme() -> None:
    readme = (ROOT / "studies" / "README.md").read_text()
    for script in sorted((ROOT / "studies").glob("*.py")):
        assert f"`{script.name}`" in readme, f"studies/README.md does not list {script.name}"


def _clone_run(rows: dict[str, dict[str, float]]) -> dict[str, object]:
    """A clone_eval result with only what variant_cv reads."""
    variants = sorted({v for scores in rows.values() for v in scores})
    return {
        "instant_variants": {v: {} for v in variants},
        "speakers": [
            {
                "speaker": speaker,
                **{v: {"judge_norm": s, "wer": 0.0} for v, s in scores.items()},
                "builtin_best_per_sex_toned": {"judge_norm": 0.3},
            }
            for speaker, scores in rows.items()
        ],
    }


def test_variant_cv_scores_each_speaker_with_the_choice_made_on_the_others(
    tmp_path: Path,
) -> None:
    import variant_cv

    # "lucky" wins in-sample only through speaker c.
    rows = {
        "a": {"instant": 0.5, "steady": 0.6, "lucky": 0.5},
        "b": {"instant": 0.5, "steady": 0.6, "lucky": 0.5},
        "c": {"instant": 0.5, "steady": 0.2, "lucky": 0.9},
    }
    # A second run over the same speakers adds a variant (merged, not a new set).
    extra = {s: {"instant": 0.5, "other": 0.0} for s in rows}
    paths = []
    for name, run in (("dev", _clone_run(rows)), ("dev_more", _clone_run(extra))):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(run))
    out = tmp_path / "cv.json"
    assert variant_cv.main([*map(str, paths), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert list(result["runs"]) == ["dev"]
    dev = result["runs"]["dev"]
    assert dev["in_sample"]["lucky"] == pytest.approx(0.6333, abs=1e-3)
    # Without a (or b) "lucky" leads on c's 0.9 and scores 0.5 on the held-out
    # speaker; without c "steady" leads and scores 0.2 on c: 0.4 in all, not 0.633.
    picks = {c["speaker"]: c["chosen"] for c in result["loso"]["speakers"]}
    assert picks == {"a": "lucky", "b": "lucky", "c": "steady"}
    assert dev["loso_judge_norm"] == pytest.approx((0.5 + 0.5 + 0.2) / 3)
    assert dev["loso_margin_over_toned"] == pytest.approx(0.4 - 0.3)
    assert "other" in dev["in_sample"]


def _scaled(judge: dict[str, float], heard: dict[str, float]) -> dict[str, dict[str, float]]:
    return {a: {"judge_norm": judge[a], "heard": heard[a]} for a in judge}


def test_formant_scale_summary_chooses_alpha_on_the_other_speakers() -> None:
    import formant_scale_study

    flat = {"0.96": 0.5, "1.00": 0.5, "1.04": 0.5}
    rows = [
        # The encoder prefers 0.96 everywhere; the judge agrees only for "a".
        {"speaker": "a", "sex": "F", "formant_ratio": 1.04,
         "alphas": _scaled({"0.96": 0.9, "1.00": 0.5, "1.04": 0.1}, {**flat, "0.96": 0.8})},
        {"speaker": "b", "sex": "F", "formant_ratio": 1.0,
         "alphas": _scaled({"0.96": 0.1, "1.00": 0.5, "1.04": 0.6}, {**flat, "0.96": 0.8})},
        {"speaker": "c", "sex": "M", "formant_ratio": 0.97,
         "alphas": _scaled({"0.96": 0.2, "1.00": 0.4, "1.04": 0.3}, {**flat, "0.96": 0.8})},
    ]  # fmt: skip
    summary = formant_scale_study.summarize(rows)
    assert summary["unscaled"] == pytest.approx((0.5 + 0.5 + 0.4) / 3)
    assert summary["oracle"] == pytest.approx((0.9 + 0.6 + 0.4) / 3)
    # Snapped to the grid: a → 1.04, b → 1.00, c → 0.96.
    assert summary["formants"] == pytest.approx((0.1 + 0.5 + 0.2) / 3)
    # Per sex, left out: a gets b's best (1.04), b gets a's (0.96), c has no
    # other male speaker to choose on and keeps factor 1.
    assert summary["per_sex_loso"] == pytest.approx((0.1 + 0.1 + 0.4) / 3)
    # One factor for all, left out (ties go to the first factor): a → 1.00
    # (b and c tie 1.00 with 1.04), b → 0.96, c → 0.96 (a and b tie it with 1.00).
    assert summary["global_loso"] == pytest.approx((0.5 + 0.1 + 0.2) / 3)
    # The encoder hears 0.96 best by 0.3, more than any prior weight takes off
    # (1.0 x 0.06 octave), so 0.96 is chosen for every held-out speaker.
    assert summary["encoder_loso"] == pytest.approx((0.9 + 0.1 + 0.2) / 3)


def test_formant_scale_moves_the_formants_and_keeps_the_pitch() -> None:
    import formant_scale_study
    import soxr
    from scipy.signal import lfilter

    from voxclone.synth.audio.effects import median_f0

    rate = 24_000
    # A 150 Hz pulse train through four resonances: a vowel-like test signal.
    x = np.zeros(rate)
    x[:: rate // 150] = 1.0
    for centre, bandwidth in ((700, 80), (1200, 90), (2500, 120), (3500, 150)):
        r, theta = np.exp(-np.pi * bandwidth / rate), 2 * np.pi * centre / rate
        x = lfilter([1 - r], [1, -2 * r * np.cos(theta), r * r], x)
    x = (0.3 * x / np.abs(x).max()).astype(np.float32)
    assert formant_scale_study.scale_envelope(x, rate, 1.0) is x

    def formants(y: np.ndarray) -> np.ndarray:
        return formant_scale_study.median_formants(soxr.resample(y, rate, 16_000))

    before = formants(x)
    assert before == pytest.approx([700, 1200, 2500, 3500], rel=0.07)
    up = formant_scale_study.scale_envelope(x, rate, 1.12)
    assert formants(up) / before == pytest.approx([1.12] * 4, abs=0.03)
    assert median_f0(up, rate) == pytest.approx(150.0, rel=0.01)


def _stock_run(rows: dict[str, tuple[float, float, float, float]], *, check: bool = False) -> dict:
    """A clone_eval result with only what stock_preference reads: per speaker
    (clone heard, clone judge, closest built-in heard, its judge); the judge
    is normalized as (sim - 0) / (1 - 0), so raw and normalized agree."""
    return {
        "stock_check": check,
        "same_speaker_mean": 1.0,
        "stranger_same_sex_mean": {"M": 0.0},
        "speakers": [
            {
                "speaker": speaker,
                "sex": "M",
                "instant": {
                    "probe_similarity": clone_heard,
                    "judge_norm": clone_judge,
                    "stock_heard": {"near": stock_heard, "far": stock_heard - 0.2},
                },
                "builtin_toned_sims": {"near": stock_judge, "far": 0.9},
                "builtin_best_per_sex_toned": {"judge_norm": 0.3},
            }
            for speaker, (clone_heard, clone_judge, stock_heard, stock_judge) in rows.items()
        ],
    }


def test_stock_preference_is_chosen_on_the_other_speakers(tmp_path: Path) -> None:
    import stock_preference

    # a gains from a built-in heard 0.03 below the clone, b loses from one 0.05 below.
    fit = {"a": (0.80, 0.3, 0.77, 0.6), "b": (0.80, 0.5, 0.75, 0.1)}
    test = {"h": (0.80, 0.2, 0.78, 0.4)}
    paths = {name: tmp_path / f"{name}.json" for name in ("dev", "held")}
    paths["dev"].write_text(json.dumps(_stock_run(fit)))
    paths["held"].write_text(json.dumps(_stock_run(test)))
    out = tmp_path / "pref.json"
    argv = ["--fit", str(paths["dev"]), "--test", str(paths["held"]), "--out", str(out)]
    assert stock_preference.main(argv) == 0
    result = json.loads(out.read_text())
    # In-sample, 0.04-0.05 switches a only: (0.6 + 0.5) / 2 - 0.3.
    assert result["chosen_on_all_fit_speakers"] == pytest.approx(0.04)
    dev = result["sets"]["dev"]
    assert dev["margin_chosen"] == pytest.approx(0.25)
    assert dev["margin_no_check"] == pytest.approx(0.1)
    # Without a, nothing favours a preference (the smallest, 0, is kept): a
    # keeps its clone; without b, 0.04 leaves b's clone alone: (0.3 + 0.5) / 2 - 0.3.
    assert dev["margin_loso"] == pytest.approx(0.1)
    assert result["fold_choices"] == {"0.00": 1, "0.04": 1}
    held = result["sets"]["held"]
    assert held["margin_loso"] is None
    assert held["margin_chosen"] == pytest.approx(0.1)  # h switched: 0.4 - 0.3
    assert [s["speaker"] for s in held["switched_at_product"]] == ["h"]  # at 0.03
    # A run with the stock check on has already switched: refused.
    paths["dev"].write_text(json.dumps(_stock_run(fit, check=True)))
    with pytest.raises(SystemExit):
        stock_preference.main(argv)
