"""Measure English intelligibility of shipped packs and candidate blends.

Writes studies/results/builtin_voices.json; the winners become the built-in
``clear_female`` / ``clear_male`` voices in synth/engine/kokoro/builtin_voices.py.

    python studies/choose_builtins.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from voxclone.config import Settings  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import (  # noqa: E402
    EngineConfig,
    SynthItem,  # noqa: E402
)
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402

SENTENCES = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It is easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.",
    "Four hours of steady work faced us.",
]

CANDIDATES: dict[str, dict[str, float]] = {
    "jf_alpha": {"jf_alpha": 1.0},
    "jf_gongitsune": {"jf_gongitsune": 1.0},
    "jf_nezumi": {"jf_nezumi": 1.0},
    "jf_tebukuro": {"jf_tebukuro": 1.0},
    "jm_kumo": {"jm_kumo": 1.0},
    "f_gong_nezumi": {"jf_gongitsune": 0.5, "jf_nezumi": 0.5},
    "f_gong_kumo": {"jf_gongitsune": 0.75, "jm_kumo": 0.25},
    "f_gong_nez_kumo": {"jf_gongitsune": 0.45, "jf_nezumi": 0.35, "jm_kumo": 0.2},
    "f_four": {"jf_gongitsune": 0.25, "jf_nezumi": 0.25, "jf_alpha": 0.25, "jf_tebukuro": 0.25},
    "m_kumo_gong": {"jm_kumo": 0.8, "jf_gongitsune": 0.2},
    "m_kumo_nez": {"jm_kumo": 0.85, "jf_nezumi": 0.15},
}


def blend(packs: dict[str, np.ndarray], weights: dict[str, float]) -> np.ndarray:
    total = sum(weights.values())
    return sum(packs[k] * (w / total) for k, w in weights.items())  # type: ignore[return-value]


def main() -> None:
    engine = registry.create("kokoro", EngineConfig(Settings().models_dir))
    engine.warmup()
    g2p = engine.tokenizer()
    asr = Transcriber()
    ids = [g2p.token_ids(g2p.phonemize(s, "en-us")) for s in SENTENCES]
    results: dict[str, dict[str, Any]] = {}
    for name, weights in CANDIDATES.items():
        style = blend(engine.style_packs(), weights)
        wers = []
        started = time.perf_counter()
        for text, tok in zip(SENTENCES, ids, strict=True):
            audio = engine.synthesize([SynthItem(tok, style, 1.0)])[0]
            wers.append(word_error_rate(text, asr.transcribe(audio, 24000)))
        results[name] = {
            "weights": weights,
            "wer": float(np.mean(wers)),
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(f"{name:18s} WER {100 * results[name]['wer']:5.1f} %", flush=True)
    out = ROOT / "studies" / "results" / "builtin_voices.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"sentences": SENTENCES, "results": results}, indent=1))


if __name__ == "__main__":
    main()
