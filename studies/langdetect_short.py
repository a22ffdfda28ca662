"""Which language does voxclone hear in short English text with foreign names?

Runs the language detector the speech service uses (when a request names no
language, with the configured default en-us) over 42 short English phrases
(2-6 words, names and places: "Mister Nguyen is here.") and 15 short phrases
in the other Latin-script languages, and prints a confusion table (true
language x detected) with the misread phrases. Nothing is spoken: detection
alone decides which phonemes and lexicon a text gets.

Run: ``python studies/langdetect_short.py [--label NAME]`` (seconds). Run it on
an older checkout with ``PYTHONPATH=<old>/src`` to compare. Writes
studies/results/langdetect_short.json.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from voxclone.synth.text.langdetect import detect_language

RESULTS = Path(__file__).parent / "results"
ENGLISH = (
    "Mister Nguyen is here.",
    "Call Pierre tomorrow.",
    "Meet Giovanni at noon.",
    "Ask Rosa about it.",
    "Send it to Dubois.",
    "Carlos is coming tonight.",
    "Dinner with Isabella Rossi.",
    "Fly to Rio tomorrow.",
    "Lunch in Marseille.",
    "Directions to Toledo.",
    "Turn left on Rue Royale.",
    "Maria Lopez called again.",
    "Jean Paul is late.",
    "The train to Lyon.",
    "Welcome to San Diego.",
    "Pick up Antoine.",
    "Is Francesca there?",
    "Remind Sofia at five.",
    "Play Despacito.",
    "Book a table at Chez Panisse.",
    "Mario and Luigi.",
    "Open Santa Monica map.",
    "Call Mom.",
    "Text Ahmed back.",
    "Good morning, Chloe.",
    "Visit Lake Como.",
    "Flights to Montreal.",
    "Weather in Porto Alegre.",
    "Order pizza margherita.",
    "Nguyen will call later.",
    "See you, Benoit.",
    "Thanks, Alejandro.",
    "Drive to Sacramento.",
    "Tickets for La Traviata.",
    "Paolo bought croissants.",
    "Camille sent the photos.",
    "Meet at Place Vendome.",
    "Hi Gabriela.",
    "The Loire valley trip.",
    "Andre is on vacation.",
    "Avenue des Champs.",
    "Lucia Fernandes arrived.",
)
# Written after the function-word rule was fixed, to check it on phrases it
# was not developed on.
HELD_OUT = (
    "Ring Mehdi at lunch.",
    "Is Dmitri awake?",
    "Where is Montpellier?",
    "Buy tickets for Verona.",
    "Say hi to Luis.",
    "Dominique sent flowers.",
    "Remind Giulia tonight.",
    "Taxi to Barcelona airport.",
    "Joaquin won again.",
    "Coffee with Margaux.",
    "Lorenzo fixed the sink.",
    "Directions to Guadalajara please.",
    "Pablo loves tennis.",
    "Renaud called twice.",
    "Fernanda is outside.",
    "The Amalfi coast.",
    "Email Jacques the report.",
    "Pedro and Ines.",
    "Naples pizza night.",
    "Hotel in Florianopolis.",
)
# Short phrases that are foreign: a clear one should still switch.
FOREIGN = (
    ("es", "Buenos días."),
    ("es", "¿Dónde está la estación?"),
    ("es", "La cuenta, por favor."),
    ("fr", "Merci beaucoup."),
    ("fr", "Je ne sais pas."),
    ("fr", "Il fait beau aujourd'hui."),
    ("it", "Grazie mille."),
    ("it", "Come stai oggi?"),
    ("it", "Vorrei un caffè, per favore."),
    ("pt-br", "Obrigado, até logo."),
    ("pt-br", "Bom dia, tudo bem?"),
    ("pt-br", "Onde fica o banheiro?"),
    ("es", "Hola, ¿cómo estás hoy? Espero que muy bien."),
    ("fr", "Bonjour à tous, merci d'être venus ce soir."),
    ("it", "Il gatto dorme sul divano tutto il giorno."),
)
LANGUAGES = ("en-us", "es", "fr", "it", "pt-br")
HELD_OUT_ROW = "en-us (held out)"


def measure() -> dict[str, object]:
    rows = [("en-us", "en-us", text) for text in ENGLISH]
    rows += [(HELD_OUT_ROW, "en-us", text) for text in HELD_OUT]
    rows += [(truth, truth, text) for truth, text in FOREIGN]
    table: dict[str, Counter[str]] = {}
    wrong = []
    for row, truth, text in rows:
        heard = detect_language(text)
        table.setdefault(row, Counter())[heard] += 1
        if heard != truth:
            wrong.append({"text": text, "truth": truth, "detected": heard})
    return {"table": {row: dict(counts) for row, counts in table.items()}, "wrong": wrong}


def render(result: dict[str, object]) -> str:
    table = result["table"]
    assert isinstance(table, dict)
    lines = ["| true \\ detected | " + " | ".join(LANGUAGES) + " | right |"]
    lines.append("|---" * (len(LANGUAGES) + 2) + "|")
    for row, counts in table.items():
        truth = "en-us" if row == HELD_OUT_ROW else row
        total = sum(counts.values())
        cells = [str(counts.get(lang, 0)) for lang in LANGUAGES]
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {counts.get(truth, 0)}/{total} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="current")
    args = parser.parse_args()
    result = measure()
    print(render(result))
    for row in result["wrong"]:  # type: ignore[attr-defined]
        print(f"  {row['truth']:5s} -> {row['detected']:5s}  {row['text']}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "langdetect_short.json"
    runs = json.loads(path.read_text()) if path.exists() else {}
    runs[args.label] = result
    path.write_text(json.dumps(runs, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
