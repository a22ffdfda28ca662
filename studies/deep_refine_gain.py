"""Deep refine (issue 47 item 2): does descending on the timbre half through
the differentiable Kokoro, toward the reference as the product's listeners
hear it, make a voice closer to the speaker on sentences it never optimized?

For every fit and validation speaker of bench/speaker_splits.py with two or
more recordings: enroll the longest accepted recording through the product
(``build_runtime`` → ``VoiceService.enroll``, no refinement), then run
:class:`voxclone.synth.voice.deep_refine.DeepRefiner` from the stored voice on
the refine sentences (``cloning_setup.REFINE_SENTENCES``), its loss heard by
CAM++ and GE2E (torch copies of the product's listeners) through the voice's
tone filter. Both voices then speak bench/clone_eval.py's three sentences
through the ONNX engine (what serving renders) with the stored tone, and are
heard by three encoders against the speaker's *other* recordings: the judge
(never used by the product), GE2E and CAM++, normalized per encoder (0 = a
same-sex stranger, 1 = another real recording). WER by the product's
Whisper on the three sentences.

    nice -n 10 python studies/deep_refine_gain.py [--steps 16] [--prior 0.3] [--lr 0.02]

Writes studies/results/deep_refine_gain.{json,md}. The test split is not this
study's to score.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import soxr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from stock_moved import CONSENT, Encoders, _tone  # noqa: E402

import speaker_splits  # noqa: E402
from _common import write_result  # noqa: E402
from clone_eval import (  # noqa: E402
    DEFAULT_EVALDATA,
    SENTENCES,
    choose_enrollment,
    utterances_by_speaker,
)
from voice_table import Dnsmos  # noqa: E402
from voxclone.bootstrap import build_runtime  # noqa: E402
from voxclone.cloning_setup import REFINE_SENTENCES  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.models_location import default_models_dir  # noqa: E402
from voxclone.service.voices.request import EnrollRequest  # noqa: E402
from voxclone.synth.audio.tone import ToneFilter  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.engine.base import SynthItem  # noqa: E402
from voxclone.synth.engine.kokoro.assets import assemble_model, load_vocab  # noqa: E402
from voxclone.synth.engine.kokoro.torch_model import build_torch_kokoro  # noqa: E402
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402
from voxclone.synth.voice.deep_refine import (  # noqa: E402
    DeepRefineConfig,
    DeepRefiner,
    TimbrePrior,
    tone_post,
)
from voxclone.synth.voice.differentiable_listeners import DifferentiableListeners  # noqa: E402

RATE = 24_000
ARMS = ("instant", "deep")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--split", default="fit,validation")
    parser.add_argument("--speakers", type=int, default=0, help="limit (0 = all)")
    parser.add_argument("--steps", type=int, default=DeepRefineConfig.steps)
    parser.add_argument("--lr", type=float, default=DeepRefineConfig.learning_rate)
    parser.add_argument("--prior", type=float, default=DeepRefineConfig.prior_weight)
    parser.add_argument("--probes", type=int, default=len(REFINE_SENTENCES))
    parser.add_argument(
        "--out", type=Path, default=ROOT / "studies" / "results" / "deep_refine_gain"
    )
    parser.add_argument(
        "--final-test-score",
        action="store_true",
        help="score the test split (only), once, with settings chosen on fit + validation",
    )
    args = parser.parse_args(argv)
    splits = {s.strip() for s in args.split.split(",")}
    if args.final_test_score:
        splits = {"test"}
        if args.out == parser.get_default("out"):
            args.out = args.out.with_name("deep_refine_gain_test")
    elif "test" in splits:
        parser.error("the test split is scored once (--final-test-score), not here")

    import torch

    torch.set_num_threads(2)
    load = os.getloadavg()[0]
    by_speaker = utterances_by_speaker(args.evaldata)
    frozen = speaker_splits.load()
    chosen = sorted(s for s, u in by_speaker.items() if len(u) >= 2 and frozen.get(s) in splits)
    if args.speakers:
        chosen = chosen[: args.speakers]

    models_dir = default_models_dir(Path(tempfile.mkdtemp(prefix="deep_refine_home_")))
    encoders = Encoders(models_dir)
    audio, sexes, real, normalizers = encoders.scoring(args.evaldata, by_speaker)

    home = Path(tempfile.mkdtemp(prefix="deep_refine_"))
    runtime = build_runtime(Settings(home=home, models_dir=models_dir, warm_cloning=False))
    voices = runtime.voices
    assert voices is not None and voices.pipeline is not None
    engine = next(iter(runtime.engines.values())).engine
    tokenizer = engine.tokenizer()

    def tokens_of(text: str) -> tuple[int, ...]:
        return tuple(tokenizer.token_ids(tokenizer.phonemize(text, "en-us")))

    eval_tokens = [tokens_of(s) for s in SENTENCES]
    probe_tokens = [tokens_of(s) for s in REFINE_SENTENCES[: args.probes]]
    packs = np.stack(
        [np.asarray(v.style).reshape(-1, 256) for v in engine.builtin_voices().values()]
    )
    began = time.perf_counter()
    model = build_torch_kokoro(assemble_model(models_dir, verify_existing=False), load_vocab())
    listeners = DifferentiableListeners.load(models_dir)
    build_s = time.perf_counter() - began
    config = DeepRefineConfig(steps=args.steps, learning_rate=args.lr, prior_weight=args.prior)
    refiner = DeepRefiner(model, listeners.embedders(), TimbrePrior(packs), config)
    asr = Transcriber()

    dnsmos = Dnsmos()
    heard24: dict[str, np.ndarray] = {}

    def speak(style: np.ndarray, tone: ToneFilter | None, arm: str) -> list[np.ndarray]:
        clips = [engine.synthesize([SynthItem(t, style, 1.0)])[0] for t in eval_tokens]
        if tone is not None:
            clips = [tone.apply(c, RATE) for c in clips]
        heard24[arm] = np.concatenate(clips)  # ~9 s: one DNSMOS window
        return [soxr.resample(c, RATE, 16_000).astype(np.float32) for c in clips]

    detector = SpeechDetector()
    rows: list[dict[str, Any]] = []
    for speaker in chosen:
        utts = sorted(by_speaker[speaker], key=lambda e: -e["duration_s"])
        enrollment = choose_enrollment(utts, args.evaldata, detector, audio, admit_rejected=False)
        if enrollment is None:
            print(f"{speaker}: no accepted recording", flush=True)
            continue
        clip = (args.evaldata / enrollment.entry["file"]).read_bytes()
        record, _ = voices.enroll(EnrollRequest(clip, speaker[:60], "study", CONSENT))
        assert record.style is not None
        tone = _tone(record.tone_db)
        reference16 = audio[enrollment.entry["file"]]
        references = {n: encoders.embed(n, [reference16]) for n in ("ge2e", "campplus")}
        cpu0 = time.process_time()
        result = refiner.refine(
            record.style,
            probe_tokens,
            references,
            post=None if tone is None else tone_post(tone.taps(RATE)),
        )
        cpu_s = time.process_time() - cpu0
        deep_pack = result.pack(record.style)
        sentences = {
            "instant": speak(record.style, tone, "instant"),
            "deep": speak(deep_pack, tone, "deep"),
        }
        held = [e for e in by_speaker[speaker] if e["file"] != enrollment.entry["file"]]
        row: dict[str, Any] = {
            "speaker": speaker,
            "split": frozen[speaker],
            "sex": sexes[speaker],
            "enrolled_from": enrollment.entry["file"],
            "refine_s": round(result.seconds, 1),
            "refine_cpu_s": round(cpu_s, 1),
            "best_step": result.best_step,
            "offset_norm": round(float(np.linalg.norm(result.offset)), 4),
            # The offset itself: the refined voice is the enrollment's (deterministic)
            # plus this, so a later measurement (DNSMOS, another listener) needs no rerun.
            "offset": [round(float(x), 6) for x in result.offset],
            "probe_similarity_first": result.steps[0].similarity,
            "probe_similarity_best": result.steps[result.best_step].similarity,
            "prior_first": result.steps[0].prior,
            "prior_best": result.steps[result.best_step].prior,
        }
        for name in encoders.names:
            targets = [real[name][speaker][by_speaker[speaker].index(e)] for e in held]
            for arm, clips in sentences.items():
                vec = encoders.embed(name, clips)
                sim = float(np.mean([vec @ t for t in targets]))
                row[f"{arm}_{name}"] = round(normalizers[name](sim, sexes[speaker]), 4)
        for arm, clips in sentences.items():
            row[f"{arm}_wer"] = round(
                float(
                    np.mean(
                        [
                            word_error_rate(s, asr.transcribe(c, 16_000))
                            for s, c in zip(SENTENCES, clips, strict=True)
                        ]
                    )
                ),
                4,
            )
        for arm, audio24 in heard24.items():
            row[f"{arm}_p808"] = round(dnsmos.score(audio24)["p808"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
        voices.delete(record.id, "study")
    runtime.close()

    summary: dict[str, Any] = {"speakers": len(rows), "host_load_1min": round(load, 2)}
    for key in [f"{a}_{n}" for a in ARMS for n in (*encoders.names, "wer", "p808")]:
        summary[key] = round(float(np.mean([r[key] for r in rows])), 4)
    for name in encoders.names:
        gains = [r[f"deep_{name}"] - r[f"instant_{name}"] for r in rows]
        summary[f"gain_{name}"] = round(float(np.mean(gains)), 4)
        summary[f"better_{name}"] = sum(1 for g in gains if g > 0)
    summary["refine_s_mean"] = round(float(np.mean([r["refine_s"] for r in rows])), 1)
    summary["refine_cpu_s_mean"] = round(float(np.mean([r["refine_cpu_s"] for r in rows])), 1)
    result_doc = {
        "command": " ".join(["python studies/deep_refine_gain.py", *(argv or sys.argv[1:])]),
        "splits": sorted(splits),
        "config": {"steps": args.steps, "lr": args.lr, "prior": args.prior},
        "probes": list(REFINE_SENTENCES[: args.probes]),
        "sentences": SENTENCES,
        "model_build_s": round(build_s, 1),
        "summary": summary,
        "rows": rows,
    }
    write_result(args.out.with_suffix(".json"), result_doc, markdown(result_doc))
    print(json.dumps(summary, indent=2))
    return 0


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    c = result["config"]
    lines = [
        "# Deep refine: the timbre half optimized through the differentiable Kokoro",
        "",
        f"`{result['command']}`",
        "",
        f"{s['speakers']} speakers ({', '.join(result['splits'])}); {c['steps']} steps, "
        f"learning rate {c['lr']}, prior weight {c['prior']}; optimized on "
        f"{len(result['probes'])} refine sentences, scored on {len(result['sentences'])} "
        "other sentences against the speaker's other recordings (normalized: 0 = "
        "same-sex stranger, 1 = another real recording). Host load at the start "
        f"{s['host_load_1min']}.",
        "",
        "| voice | judge | GE2E | CAM++ | WER | DNSMOS P.808 |",
        "|---|---|---|---|---|---|",
    ]
    for arm in ARMS:
        lines.append(
            f"| {arm} | {s[f'{arm}_judge']:.3f} | {s[f'{arm}_ge2e']:.3f} | "
            f"{s[f'{arm}_campplus']:.3f} | {s[f'{arm}_wer']:.1%} | {s[f'{arm}_p808']:.2f} |"
        )
    lines.append("")
    for n in ("judge", "ge2e", "campplus"):
        lines.append(
            f"* deep − instant ({n}): {s[f'gain_{n}']:+.3f}, better for "
            f"{s[f'better_{n}']} of {s['speakers']}"
        )
    lines.append(
        f"* refine wall time {s['refine_s_mean']} s, CPU {s['refine_cpu_s_mean']} s per voice"
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
