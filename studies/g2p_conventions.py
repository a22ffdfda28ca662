"""Do the espeak languages other than English reach Kokoro in the alphabet its voices learnt?

Two parts:

* ``drops``: every language's sentences (the voice-table ones and a few that
  hold the language's rarer sounds) through the product's G2P; every symbol
  without a Kokoro id, which the G2P drops, is counted per language. No model
  is loaded: seconds.
* ``--ab``: the same voice says the same sentences with the product's phonemes
  ("product": only the tied pairs fold, ɐ kept) and with one alternative per
  language, made from the product's phonemes: Portuguese with the English
  folds the G2P applied to every language until 2026-12-04 ("english-folds":
  ɐ → ə, ʲ dropped), Italian with Kokoro's own fold of a long s
  ("long-s-as-S": ss → S; espeak ties every ss of these sentences). Whisper
  base WER and DNSMOS P.808 / OVRL per voice and variant.

    python studies/g2p_conventions.py                 # drops only
    python studies/g2p_conventions.py --ab            # and the A/B (about 10 minutes)

Writes studies/results/g2p_conventions.json and .md.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import write_result  # noqa: E402
from voice_table import SENTENCES, error_rate  # noqa: E402

# Beyond the voice-table sentences: the sounds those leave out (French nasal
# vowels and ɥ words; Portuguese nasal diphthongs; Italian geminates; Spanish
# opening marks; Hindi nasalised vowels and conjuncts).
EXTRA: dict[str, tuple[str, ...]] = {
    "fr": (
        "Un bon vin blanc, enfin ! Lui, il a huit ans.",
        "« Bonjour », dit-il : l’école est-elle ouverte ?",
        "Nous allons à la boulangerie acheter du pain.",
    ),
    "es": ("¿La escuela está abierta? ¡Qué pena!", "Llueve mucho en junio y hay charcos."),
    "it": ("Gli gnocchi sono buoni, ma il pizzaiolo è stanco.", "Sciare in montagna è bellissimo."),
    "pt-br": ("Não sei se ele vem amanhã ou depois.", "O pão e o feijão estão prontos."),
    "hi": ("मैं आज बाज़ार जाऊँगा और फल ख़रीदूँगा।", "ज्ञान, क्षमा और श्रद्धा महत्वपूर्ण हैं।"),
}
LANGUAGES = ("fr", "es", "it", "pt-br", "hi")

# The A/B: languages whose phonemes changed, with sentences full of the changed sounds.
AB_SENTENCES: dict[str, tuple[str, ...]] = {
    "pt-br": (
        "Não sei se ele vem amanhã ou depois.",
        "O pão e o feijão estão prontos na mesa.",
        "A mãe chegou cedo e abriu a janela.",
        "Minha irmã comprou uma maçã e um melão.",
        "As crianças estão brincando no jardim.",
        "O avião saiu de São Paulo às nove horas.",
        "Eles não querem sair com esta chuva.",
        "Amanhã vamos visitar a nossa avó no campo.",
        "A canção do cantor emocionou a multidão.",
        "Precisamos de mais informação sobre a questão.",
        "O cão correu atrás da bola vermelha.",
        "Ela tem um irmão e duas irmãs mais novas.",
    ),
    "it": (
        "Sciare in montagna è bellissimo.",
        "Professore, posso uscire? Certo, ma torna presto.",
        "La rossa è la più bella della classe.",
        "Il passaggio era stretto e pieno di sassi.",
        "Abbiamo mangiato un grosso pesce al mare.",
        "Questo vestito è troppo grande per me.",
    ),
}
AB_VOICES = {"pt-br": ("pf_dora", "pm_alex"), "it": ("if_sara", "im_nicola")}


def english_folds(phonemes: str) -> str:
    """``phonemes`` as the G2P wrote them for these languages before 2026-12-04."""
    return phonemes.replace("ɐ", "ə").replace("ʲ", "")


def long_s_as_s(phonemes: str) -> str:
    """``phonemes`` with Kokoro's own fold of the long s (misaki: s͡s → S)."""
    return phonemes.replace("ss", "S")


ALTERNATIVE = {"pt-br": ("english-folds", english_folds), "it": ("long-s-as-S", long_s_as_s)}


class _Drops(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.symbols: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if "dropping phoneme" in record.getMessage():
            self.symbols[str(getattr(record, "symbol", "?"))] += 1


def drops() -> dict[str, Any]:
    """Per language: the symbols dropped (each counted once per G2P, as logged)
    and the phonemes of every sentence."""
    from voxclone.synth.engine.kokoro.assets import load_vocab
    from voxclone.synth.text.g2p import EspeakG2P

    vocab = load_vocab()
    out: dict[str, Any] = {}
    logger = logging.getLogger("voxclone.synth.text.g2p")
    for language in LANGUAGES:
        g2p = EspeakG2P(vocab)  # its own warned set: each symbol is logged once here
        handler = _Drops()
        logger.addHandler(handler)
        try:
            texts = SENTENCES[language] + EXTRA[language]
            phonemes = [g2p.phonemize(text, language) for text in texts]
        finally:
            logger.removeHandler(handler)
        out[language] = {
            "dropped": dict(handler.symbols),
            "sentences": [{"text": t, "phonemes": p} for t, p in zip(texts, phonemes, strict=True)],
        }
    return out


def run_ab() -> list[dict[str, Any]]:
    from voice_table import RATE, Dnsmos, MultilingualAsr
    from voxclone.config import Settings
    from voxclone.synth.engine import registry
    from voxclone.synth.engine.base import EngineConfig, SynthItem

    engine = registry.create("kokoro", EngineConfig(Settings().models_dir, threads=1))
    engine.load()
    voices = engine.builtin_voices()
    tokenizer = engine.tokenizer()
    dnsmos, asr = Dnsmos(), MultilingualAsr()
    pause = np.zeros(int(0.3 * RATE), np.float32)
    rows: list[dict[str, Any]] = []
    for language, texts in AB_SENTENCES.items():
        for voice in AB_VOICES[language]:
            other, rewrite = ALTERNATIVE[language]
            for variant in (other, "product"):
                errors, clips, misheard = [], [], []
                for text in texts:
                    phonemes = tokenizer.phonemize(text, language)
                    if variant != "product":
                        phonemes = rewrite(phonemes)
                    ids = tokenizer.token_ids(phonemes)
                    audio = engine.synthesize([SynthItem(ids, voices[voice].style, 1.0)])[0]
                    clips += [audio, pause]
                    heard = _heard(asr, audio, language)
                    error = float(error_rate(text, heard, language))
                    errors.append(error)
                    if error:
                        misheard.append({"text": text, "heard": heard})
                scores = dnsmos.score(np.concatenate(clips[:-1]))
                row = {
                    "language": language,
                    "voice": voice,
                    "variant": variant,
                    "wer": float(np.mean(errors)),
                    "p808": scores["p808"],
                    "ovrl": scores["ovrl"],
                    "misheard": misheard,
                }
                print(
                    f"{language:6s} {voice:10s} {variant:14s} WER {row['wer']:.1%} "
                    f"P.808 {row['p808']:.2f} OVRL {row['ovrl']:.2f}",
                    flush=True,
                )
                rows.append(row)
    return rows


def _heard(asr: Any, audio: np.ndarray, language: str) -> str:
    """What Whisper base hears, decoded as bench/voice_table.py scores it."""
    import soxr

    from voice_table import DNSMOS_RATE, RATE, WHISPER_LANGUAGES

    x = soxr.resample(np.asarray(audio, np.float32), RATE, DNSMOS_RATE).astype(np.float32)
    segments, _ = asr._model.transcribe(
        x,
        language=WHISPER_LANGUAGES[language],
        beam_size=1,
        vad_filter=False,
        condition_on_previous_text=False,
    )
    return " ".join(segment.text.strip() for segment in segments)


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "Symbols the G2P drops (no Kokoro id), per language, on the voice-table "
        "sentences and a few more (`python studies/g2p_conventions.py`):",
        "",
        "| language | sentences | dropped symbols |",
        "|---|---:|---|",
    ]
    for language, entry in result["drops"].items():
        dropped = ", ".join(f"`{s}` ×{n}" for s, n in entry["dropped"].items()) or "none"
        lines.append(f"| {language} | {len(entry['sentences'])} | {dropped} |")
    if result.get("ab"):
        lines += [
            "",
            "The same voice, the product's phonemes (`product`) against Portuguese with "
            "the English folds applied to every language before 2026-12-04 "
            "(`english-folds`: ã as ə̃) and Italian with Kokoro's own long-s fold "
            "(`long-s-as-S`); Whisper base WER and DNSMOS on "
            + ", ".join(f"{len(t)} {lang} sentences" for lang, t in AB_SENTENCES.items())
            + ":",
            "",
            "| language | voice | variant | WER | P.808 | OVRL |",
            "|---|---|---|---:|---:|---:|",
        ]
        for row in result["ab"]:
            lines.append(
                f"| {row['language']} | {row['voice']} | {row['variant']} | {row['wer']:.1%} | "
                f"{row['p808']:.2f} | {row['ovrl']:.2f} |"
            )
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ab", action="store_true", help="also measure the A/B (WER, DNSMOS)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "studies" / "results" / "g2p_conventions.json"
    )
    args = parser.parse_args()
    result: dict[str, Any] = {
        "command": "python studies/g2p_conventions.py" + (" --ab" if args.ab else ""),
        "drops": drops(),
    }
    if args.ab:
        result["ab"] = run_ab()
    write_result(args.out, result, markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
