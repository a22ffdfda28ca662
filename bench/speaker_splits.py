"""The one fit / validation / test split of the evaluation speakers (issue 38).

Every cloning choice is fitted on ``fit``, compared on ``validation``, and the
``test`` split is scored only when a change is final, at most once per change,
and reported beside validation (docs/design.md §4: a set looked at many times has
become a training set). The split was drawn once, on 2026-12-04, by
:func:`draw` and frozen in ``bench/data/speaker_splits.json``; benchmarks read
the frozen file (:func:`load`), never re-draw it. A new clip source is dealt
into all three splits by the same rule (:func:`draw` on its speakers only,
appended to the file).

Rule: speakers are grouped by corpus (the name before the first ``-``), ordered
inside a corpus by a salted SHA-256 of the speaker name (no one chose the
order), and dealt round-robin ``test, validation, fit`` with the starting slot
rotating from corpus to corpus, so small corpora do not all land in one split.
Speakers with one recording are dealt the same way; they only serve the
split-singles robustness set (two halves of one recording).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import defaultdict
from pathlib import Path

SPLITS = ("test", "validation", "fit")
SALT = "voxclone-speaker-split-2026-12-04"
FROZEN = Path(__file__).resolve().parent / "data" / "speaker_splits.json"


def corpus_of(speaker: str) -> str:
    return speaker.split("-", 1)[0]


def draw(speakers: list[str]) -> dict[str, str]:
    """speaker -> split, by the rule in the module docstring."""
    by_corpus: dict[str, list[str]] = defaultdict(list)
    for speaker in sorted(set(speakers)):
        by_corpus[corpus_of(speaker)].append(speaker)
    out: dict[str, str] = {}
    for i, corpus in enumerate(sorted(by_corpus)):
        ordered = sorted(
            by_corpus[corpus], key=lambda s: hashlib.sha256(f"{SALT}:{s}".encode()).hexdigest()
        )
        for j, speaker in enumerate(ordered):
            out[speaker] = SPLITS[(i + j) % len(SPLITS)]
    return out


def load(path: Path = FROZEN) -> dict[str, str]:
    """The frozen split: speaker -> "fit" | "validation" | "test"."""
    data = json.loads(path.read_text())
    return dict(data["speakers"])


def speakers_in(split: str, path: Path = FROZEN) -> list[str]:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    return sorted(s for s, v in load(path).items() if v == split)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument(
        "--write", action="store_true", help="freeze a first draw (refuses to overwrite)"
    )
    args = parser.parse_args()
    files = json.loads(args.manifest.read_text())["files"]
    speakers = [f["speaker"] for f in files]
    drawn = draw(speakers)
    counts: dict[str, int] = defaultdict(int)
    for f in files:
        counts[f["speaker"]] += 1
    for speaker, split in sorted(drawn.items(), key=lambda kv: (kv[1], kv[0])):
        print(f"{split:10s} {speaker:34s} recordings={counts[speaker]}")
    if args.write:
        if FROZEN.exists():
            raise SystemExit(f"{FROZEN} exists: the split is drawn once")
        FROZEN.parent.mkdir(parents=True, exist_ok=True)
        FROZEN.write_text(
            json.dumps(
                {"drawn": "2026-12-04", "rule": "bench/speaker_splits.py", "speakers": drawn},
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
