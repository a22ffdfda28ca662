"""Where should spoken consent's speaker check refuse (issue 49)?

Every dev recording goes through the product's own reference preparation
(decode, VAD, denoise, trim: synth/audio/reference.py) and is heard by the
shipped listeners (GE2E; CAM++ when its weights are installed). A "genuine"
pair is one recording of a speaker as the voice sample and another of the same
speaker as the consent clip (the 19 dev speakers with >= 2 recordings); an
"impostor" pair is a recording of another speaker as the consent clip over
the victim's sample (every ordered pair of different speakers' recordings).

For each listener the threshold is the equal-error point; the product rule
(every listener must pass, service/voices/spoken_consent.py) is scored too. Rates are
reported on all pairs and leave-one-speaker-out: the threshold is chosen
without any pair involving a speaker, then that speaker's genuine pairs give
its false rejects and its impostor pairs (as victim or impostor) its false
accepts.

    python studies/consent_threshold.py [--evaldata /work/shared/evaldata]

Writes studies/results/consent_threshold.{json,md}.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import write_result  # noqa: E402

DEFAULT_EVALDATA = Path("/work/shared/evaldata")

Pair = tuple[int, int]  # (sample recording, consent clip recording)


def pairs(speakers: Sequence[str]) -> tuple[list[Pair], list[Pair]]:
    """(genuine, impostor) ordered pairs of recording indices."""
    genuine: list[Pair] = []
    impostor: list[Pair] = []
    for i, a in enumerate(speakers):
        for j, b in enumerate(speakers):
            if i != j:
                (genuine if a == b else impostor).append((i, j))
    return genuine, impostor


def eer_threshold(genuine: np.ndarray, impostor: np.ndarray) -> float:
    """The score where false rejects (genuine below) and false accepts
    (impostor at or above) are closest, among the observed scores."""
    candidates = np.unique(np.concatenate([genuine, impostor]))
    best, best_gap = float(candidates[0]), np.inf
    for t in candidates:
        frr = float(np.mean(genuine < t))
        far = float(np.mean(impostor >= t))
        if abs(frr - far) < best_gap:
            best, best_gap = float(t), abs(frr - far)
    return best


Scores = dict[str, np.ndarray]


def rates(
    scores: Scores,
    thresholds: dict[str, float],
    genuine: list[Pair],
    impostor: list[Pair],
) -> dict[str, float]:
    """False accept / reject rates of the rule "every listener passes"."""

    def accepted(pair: Pair) -> bool:
        return all(s[pair] >= thresholds[name] for name, s in scores.items())

    far = float(np.mean([accepted(p) for p in impostor])) if impostor else 0.0
    frr = float(np.mean([not accepted(p) for p in genuine])) if genuine else 0.0
    return {"far": far, "frr": frr, "genuine": len(genuine), "impostor": len(impostor)}


def leave_one_speaker_out(
    scores: dict[str, np.ndarray],
    speakers: Sequence[str],
    genuine: list[Pair],
    impostor: list[Pair],
) -> dict[str, Any]:
    """Pooled FAR/FRR over folds whose thresholds never saw the held-out speaker."""
    false_accepts = impostors = false_rejects = genuines = 0
    for held in sorted(set(speakers)):
        involved = {i for i, s in enumerate(speakers) if s == held}
        train_g = [p for p in genuine if not involved & set(p)]
        train_i = [p for p in impostor if not involved & set(p)]
        thresholds = {
            name: eer_threshold(
                np.array([s[p] for p in train_g]), np.array([s[p] for p in train_i])
            )
            for name, s in scores.items()
        }
        test_g = [p for p in genuine if involved & set(p)]
        test_i = [p for p in impostor if involved & set(p)]
        r = rates(scores, thresholds, test_g, test_i)
        false_accepts += round(r["far"] * len(test_i))
        impostors += len(test_i)
        false_rejects += round(r["frr"] * len(test_g))
        genuines += len(test_g)
    return {
        "far": false_accepts / max(impostors, 1),
        "frr": false_rejects / max(genuines, 1),
        "false_accepts": false_accepts,
        "impostor_pairs": impostors,
        "false_rejects": false_rejects,
        "genuine_pairs": genuines,
    }


def embed_all(evaldata: Path) -> tuple[list[str], list[str], list[str], Scores]:
    """(files, speakers, sexes, {listener: embeddings}) of every dev recording."""
    import soundfile as sf

    from voxclone.config import Settings
    from voxclone.synth.audio.reference import prepare_reference
    from voxclone.synth.audio.vad import SpeechDetector
    from voxclone.synth.voice.listener import make_listener
    from voxclone.synth.voice.speaker_encoder import SpeakerEncoder

    manifest = json.loads((evaldata / "manifest.json").read_text())
    rows = [r for r in manifest["files"] if r["set"] == "dev"]
    models_dir = Settings().models_dir
    encoder = SpeakerEncoder(models_dir=models_dir)
    listeners = [make_listener("ge2e", models_dir=models_dir, encoder=encoder)]
    campplus = make_listener("campplus", models_dir=models_dir, encoder=encoder)
    if campplus.name == "campplus":
        listeners.append(campplus)
    detector = SpeechDetector()
    files, speakers, sexes = [], [], []
    vectors: dict[str, list[np.ndarray]] = {lis.name: [] for lis in listeners}
    for row in rows:
        audio, rate = sf.read(evaldata / row["file"], dtype="float32", always_2d=True)
        buf = io.BytesIO()
        sf.write(buf, audio.mean(axis=1), rate, format="WAV")
        try:
            ref = prepare_reference(
                buf.getvalue(), detector=detector, max_bytes=50 << 20, max_seconds=600.0
            )
        except Exception as exc:  # a recording the product would refuse as a sample
            print(f"skipped {row['file']}: {exc}", file=sys.stderr)
            continue
        files.append(row["file"])
        speakers.append(row["speaker"])
        sexes.append(row["sex"] if row.get("sex") in ("F", "M") else "?")
        for lis in listeners:
            vectors[lis.name].append(lis.embed(ref.samples16k, ref.sample_rate))
    return files, speakers, sexes, {k: np.asarray(v) for k, v in vectors.items()}


def study(speakers: list[str], sexes: list[str], embeddings: Scores) -> dict[str, Any]:
    genuine, impostor = pairs(speakers)
    # The impostor who tries: one of the victim's sex.
    same_sex = [p for p in impostor if sexes[p[0]] == sexes[p[1]] != "?"]
    scores = {}
    for name, e in embeddings.items():
        unit = e / np.linalg.norm(e, axis=1, keepdims=True)
        scores[name] = unit @ unit.T
    result: dict[str, Any] = {"listeners": {}}
    for name, s in scores.items():
        g = np.array([s[p] for p in genuine])
        i = np.array([s[p] for p in impostor])
        t = eer_threshold(g, i)
        result["listeners"][name] = {
            "eer_threshold": round(t, 4),
            "all_pairs": rates({name: s}, {name: t}, genuine, impostor),
            "same_sex_far": rates({name: s}, {name: t}, [], same_sex)["far"],
            "loso": leave_one_speaker_out({name: s}, speakers, genuine, impostor),
            "genuine_mean": float(g.mean()),
            "impostor_mean": float(i.mean()),
            "impostor_max": float(i.max()),
            "genuine_min": float(g.min()),
        }
    thresholds = {n: result["listeners"][n]["eer_threshold"] for n in scores}
    result["every_listener"] = {
        "thresholds": thresholds,
        "all_pairs": rates(scores, thresholds, genuine, impostor),
        "same_sex_far": rates(scores, thresholds, [], same_sex)["far"],
        "loso": leave_one_speaker_out(scores, speakers, genuine, impostor),
    }
    result["speakers"] = len(set(speakers))
    result["speakers_with_two"] = sum(1 for s in set(speakers) if speakers.count(s) >= 2)
    result["recordings"] = len(speakers)
    result["same_sex_impostor_pairs"] = len(same_sex)
    return result


def _row(label: str, thresholds: str, r: dict[str, Any], extra: str) -> str:
    loso = r["loso"]
    return (
        f"| {label} | {thresholds} | {r['all_pairs']['far']:.2%} | {r['same_sex_far']:.2%} | "
        f"{r['all_pairs']['frr']:.1%} | {loso['far']:.2%} "
        f"({loso['false_accepts']}/{loso['impostor_pairs']}) | {loso['frr']:.1%} "
        f"({loso['false_rejects']}/{loso['genuine_pairs']}) | {extra} |"
    )


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Spoken consent: speaker threshold (dev recordings)",
        "",
        f"{result['recordings']} recordings, {result['speakers']} speakers "
        f"({result['speakers_with_two']} with two or more). Pairs are ordered (voice "
        "sample, consent clip): FAR = impostor pairs accepted, FRR = genuine pairs "
        f"refused; same sex: the {result['same_sex_impostor_pairs']} impostor pairs of one "
        "sex; LOSO: each speaker scored with thresholds chosen without any of its pairs.",
        "",
        "| listener | threshold (EER) | FAR | FAR same sex | FRR | FAR LOSO | FRR LOSO | "
        "genuine mean / min, impostor mean / max |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in result["listeners"].items():
        extra = (
            f"{r['genuine_mean']:.3f} / {r['genuine_min']:.3f}, "
            f"{r['impostor_mean']:.3f} / {r['impostor_max']:.3f}"
        )
        lines.append(_row(name, f"{r['eer_threshold']:.3f}", r, extra))
    e = result["every_listener"]
    both = ", ".join(f"{k} {v:.3f}" for k, v in e["thresholds"].items())
    lines.append(_row("every listener (the product's rule)", both, e, ""))
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--out", type=Path, default=ROOT / "studies/results/consent_threshold.json")
    args = parser.parse_args(argv)
    files, speakers, sexes, embeddings = embed_all(args.evaldata)
    result = study(speakers, sexes, embeddings)
    result["command"] = "python studies/consent_threshold.py " + " ".join(argv or sys.argv[1:])
    result["files"] = files
    write_result(args.out, result, markdown(result))


if __name__ == "__main__":
    main()
