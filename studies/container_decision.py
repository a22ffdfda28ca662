"""Same recording, any container: does the clone-or-built-in decision hold (issue 47 item 3)?

Each clip is re-encoded as WAV, FLAC, MP3 (128 kb/s, 44.1 kHz), M4A (AAC,
44.1 kHz), Ogg Vorbis (44.1 kHz), Ogg Opus and WebM Opus (48 kHz)
(tests/container_clips.py), ingested by the product's
``prepare_reference`` and cloned by the product's ``CloningPipeline`` as
``cloning_setup`` wires it (Kokoro's atlas, pick weights and comparison voices,
pitch calibration, the stock check). Per clip and container it records the
decoded rate and length, the prepared reference's length, the reference
embedding's cosine to the WAV's, the clone's and the best built-in's heard
similarity, the lead (clone - best) and the decision; per clip the spread of
the lead across containers (max - min), which the stock preference must exceed
for the decision not to hang on codec noise.

    nice -n 10 python studies/container_decision.py [--evaldata-clips 4] [--label before]

The two clips of tests/data always; ``--evaldata-clips N`` adds the longest
clip of the first N speakers of the fit split (bench/speaker_splits.py).
Writes studies/results/container_decision_<label>.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import speaker_splits  # noqa: E402
from _common import write_result  # noqa: E402
from clone_eval import DEFAULT_EVALDATA, LANGUAGE, MODELS_DIR, load_wav16  # noqa: E402
from container_clips import CONTAINERS  # noqa: E402
from voxclone.synth.audio.decode import decode_audio  # noqa: E402
from voxclone.synth.audio.reference import prepare_reference  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import EngineConfig, SynthItem  # noqa: E402
from voxclone.synth.voice.atlas import VoiceAtlas  # noqa: E402
from voxclone.synth.voice.clone import InstantCloner  # noqa: E402
from voxclone.synth.voice.pick import load_weights  # noqa: E402
from voxclone.synth.voice.pipeline import CloningPipeline  # noqa: E402
from voxclone.synth.voice.pitch_calibration import PitchCalibrator  # noqa: E402
from voxclone.synth.voice.quality_report import TEST_SENTENCE  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder, cosine  # noqa: E402

LIMITS = {"max_bytes": 20 << 20, "max_seconds": 600.0}


def clips(evaldata: Path, n: int) -> list[tuple[str, np.ndarray]]:
    out = [
        (p.stem, load_wav16(p)) for p in sorted((ROOT / "tests" / "data").glob("librispeech_*.wav"))
    ]
    if n <= 0:
        return out
    fit = set(speaker_splits.speakers_in("fit"))
    longest: dict[str, dict[str, Any]] = {}
    for entry in json.loads((evaldata / "manifest.json").read_text())["files"]:
        s = entry["speaker"]
        if (
            s in fit
            and entry["duration_s"] <= 15
            and (s not in longest or entry["duration_s"] > longest[s]["duration_s"])
        ):
            longest[s] = entry
    for speaker in sorted(longest)[:n]:
        out.append((speaker, load_wav16(evaldata / longest[speaker]["file"])))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--evaldata-clips", type=int, default=0)
    parser.add_argument("--label", default="run")
    parser.add_argument("--containers", default=",".join(CONTAINERS))
    args = parser.parse_args(argv)
    names = [c.strip() for c in args.containers.split(",") if c.strip()]

    engine = registry.create("kokoro", EngineConfig(MODELS_DIR, threads=2))
    engine.load()
    g2p = engine.tokenizer()
    tokens = g2p.token_ids(g2p.phonemize(TEST_SENTENCE, LANGUAGE))
    kit = engine.cloning()
    atlas = VoiceAtlas.load(kit.packs, kit.atlas, comparison=kit.comparison)
    encoder = SpeakerEncoder()

    def probe(pack: np.ndarray) -> np.ndarray:
        return engine.synthesize([SynthItem(tokens, pack, 1.0)])[0]

    assert kit.pick_weights is not None
    pipeline = CloningPipeline(
        InstantCloner(atlas, encoder, pick=load_weights(kit.pick_weights)),
        probe=probe,
        calibrator=PitchCalibrator(atlas, probe, 24_000),
    )
    detector = SpeechDetector()
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for clip_name, x in clips(args.evaldata, args.evaldata_clips):
        wav_embedding = None
        leads = []
        for container in names:
            began = time.perf_counter()
            data = CONTAINERS[container](x)
            samples, rate = decode_audio(data, **LIMITS)  # type: ignore[arg-type]
            ref = prepare_reference(data, detector=detector, **LIMITS)  # type: ignore[arg-type]
            cloned = pipeline.clone([ref], language=LANGUAGE)
            comparison = cloned.comparison
            assert comparison is not None
            emb = cloned.print.embedding
            if wav_embedding is None:
                wav_embedding = emb
            row = {
                "clip": clip_name,
                "container": container,
                "bytes": len(data),
                "decoded_rate": rate,
                "decoded_s": round(samples.shape[0] / rate, 4),
                "reference_samples": int(ref.samples16k.shape[0]),
                "speech_s": round(ref.speech_seconds, 3),
                "cosine_to_wav": round(cosine(emb, wav_embedding), 5),
                "pitch_hz": round(cloned.print.pitch.median_hz, 2),
                "clone": round(comparison.clone_similarity, 4),
                "best_stock": comparison.best.name,
                "best": round(comparison.best.similarity, 4),
                "lead": round(comparison.lead, 4),
                "decision": "clone" if cloned.moved is None else cloned.moved.started_from,
                "seconds": round(time.perf_counter() - began, 1),
            }
            leads.append(comparison.lead)
            rows.append(row)
            print(json.dumps(row), flush=True)
        clip_rows = [r for r in rows if r["clip"] == clip_name]
        summary[clip_name] = {
            "decisions": sorted({r["decision"] for r in clip_rows}),
            "lead_spread": round(max(leads) - min(leads), 4),
            "clone_spread": round(
                max(r["clone"] for r in clip_rows) - min(r["clone"] for r in clip_rows), 4
            ),
            "min_cosine_to_wav": min(r["cosine_to_wav"] for r in clip_rows),
        }
    result = {
        "command": "nice -n 10 python studies/container_decision.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "load_average_before": os.getloadavg()[0],
        "rows": rows,
        "summary": summary,
    }
    lines = [
        f"Container decision ({args.label}): {result['command']}",
        "",
        "| clip | container | rate | decoded s | ref samples | cos to WAV | clone | best | "
        "lead | decision |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['clip']} | {r['container']} | {r['decoded_rate']} | {r['decoded_s']} | "
            f"{r['reference_samples']} | {r['cosine_to_wav']} | {r['clone']} | "
            f"{r['best']} ({r['best_stock']}) | {r['lead']} | {r['decision']} |"
        )
    lines += ["", "| clip | decisions | lead spread | clone spread | min cos to WAV |"]
    lines.append("|---|---|---|---|---|")
    for clip_name, s in summary.items():
        lines.append(
            f"| {clip_name} | {', '.join(s['decisions'])} | {s['lead_spread']} | "
            f"{s['clone_spread']} | {s['min_cosine_to_wav']} |"
        )
    out = ROOT / "studies" / "results" / f"container_decision_{args.label}.json"
    write_result(out, result, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
