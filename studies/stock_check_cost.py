"""What the stock check costs per enrollment, with the catalog's comparison voices.

Builds the product's cloning pipeline (``CloningPipeline`` as ``VoiceService``
wires it: encoder, atlas, probe renderer) and, for one recording per speaker
of the chosen splits (bench/speaker_splits.py; default fit and validation),
times the stock comparison that a clone's report runs (``StockCheck.compare``'s
hearing: shortlist, tone match and product encoder per built-in), first with
the built-ins' probe sentences not yet rendered (the first enrollments after
a start render those of their shortlist) and then again (every later enrollment). The
draft that makes a voice speakable runs none of this (it is the atlas lookup
alone), so the speakable latency does not move; bench/clone_latency.py
measures it through a server.

Reports wall and CPU seconds (process time: all threads), since the machine
is shared.

    python studies/stock_check_cost.py [--split fit,validation] [--speakers 4]

Writes studies/results/stock_check_cost.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import speaker_splits  # noqa: E402
from _common import write_result  # noqa: E402
from clone_eval import DEFAULT_EVALDATA, LANGUAGE, MODELS_DIR, load_wav16  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import EngineConfig, SynthItem  # noqa: E402
from voxclone.synth.engine.kokoro.builtin_voices import catalog_comparison  # noqa: E402
from voxclone.synth.voice.atlas import VoiceAtlas  # noqa: E402
from voxclone.synth.voice.clone import InstantCloner  # noqa: E402
from voxclone.synth.voice.pipeline import CloningPipeline, SpokenVoice  # noqa: E402
from voxclone.synth.voice.quality_report import TEST_SENTENCE  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder  # noqa: E402
from voxclone.synth.voice.stock_voices import SHORTLIST  # noqa: E402


class _Clip:
    def __init__(self, samples16k: np.ndarray) -> None:
        self.samples16k = samples16k
        self.speech_seconds = len(samples16k) / 16_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--split", default="fit,validation")
    parser.add_argument("--speakers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=ROOT / "studies/results/stock_check_cost.json")
    args = parser.parse_args(argv)

    wanted = {s for x in args.split.split(",") for s in speaker_splits.speakers_in(x.strip())}
    manifest = json.loads((args.evaldata / "manifest.json").read_text())["files"]
    chosen: dict[str, dict[str, Any]] = {}
    for entry in manifest:
        if entry["speaker"] in wanted and entry["speaker"] not in chosen:
            chosen[entry["speaker"]] = entry
    entries = [chosen[s] for s in sorted(chosen)][: args.speakers]

    engine = registry.create("kokoro", EngineConfig(MODELS_DIR))
    engine.load()
    engine.warmup()
    g2p = engine.tokenizer()
    tokens = g2p.token_ids(g2p.phonemize(TEST_SENTENCE, LANGUAGE))
    encoder = SpeakerEncoder()
    encoder.load()
    atlas = VoiceAtlas.load(engine.atlas_packs(), comparison=catalog_comparison)

    renders = [0]

    def probe(pack: np.ndarray) -> np.ndarray:
        renders[0] += 1
        return engine.synthesize([SynthItem(tokens, pack, 1.0)])[0]

    pipeline = CloningPipeline(InstantCloner(atlas, encoder), probe=probe)
    rows = []
    for entry in entries:
        clip = _Clip(load_wav16(args.evaldata / entry["file"]))
        draft = pipeline.draft(pipeline.voice_print([clip]))
        style = draft.instant.style
        voice = SpokenVoice(draft.instant.recipe, style, probe(style), None)
        tone = pipeline.tone_for(draft.print.spectrum, voice.probe)
        row: dict[str, Any] = {"speaker": entry["speaker"], "file": entry["file"]}
        for label in ("first", "again"):
            before = renders[0]
            wall, cpu = time.perf_counter(), time.process_time()
            comparison = pipeline.stock.compare(
                draft.print, voice, tone, draft.print.spectrum, language=LANGUAGE
            )
            row[f"{label}_wall_s"] = time.perf_counter() - wall
            row[f"{label}_cpu_s"] = time.process_time() - cpu
            row[f"{label}_renders"] = renders[0] - before
        assert comparison is not None
        row["heard"] = [h.name for h in comparison.heard]
        rows.append(row)
        print(json.dumps(row), flush=True)

    def median(key: str) -> float:
        return float(statistics.median(r[key] for r in rows))

    result: dict[str, Any] = {
        "command": "python studies/stock_check_cost.py " + " ".join(argv or sys.argv[1:]),
        "comparison_voices": len(atlas.stock.voices),
        "shortlist": SHORTLIST,
        "load_average_before": os.getloadavg()[0],
        "rows": rows,
        "median": {
            k: median(k) for k in ("first_wall_s", "first_cpu_s", "again_wall_s", "again_cpu_s")
        },
    }
    m = result["median"]
    md = (
        f"Stock comparison per enrollment ({result['comparison_voices']} comparison voices, "
        f"shortlist {SHORTLIST}; {len(rows)} speakers of {args.split}; shared 2-core machine, "
        f"load {result['load_average_before']:.1f}): first hearing of each speaker in a "
        "fresh process (rendering the probes of shortlisted built-ins not yet rendered: "
        f"{sum(r['first_renders'] for r in rows)} renders in all) median "
        f"{m['first_wall_s']:.2f} s wall / {m['first_cpu_s']:.2f} s "
        f"CPU; later enrollments {m['again_wall_s']:.2f} s wall / {m['again_cpu_s']:.2f} s CPU. "
        "The draft that makes a voice speakable runs none of it.\n"
    )
    write_result(args.out, result, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
