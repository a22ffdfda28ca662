"""How long an audiobook's M4B takes to assemble (service/audiobooks.py).

``python bench/audiobook_assembly.py --hours 1``: that many hours of 24 kHz
FLAC chapters (noise: the AAC encoder's cost does not depend on the words),
6 minutes each, through ``assemble_m4b`` into an AAC M4B with chapter marks,
read back with PyAV. Prints seconds of assembly per hour of audio.
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import av
import numpy as np
import soundfile as sf

from voxclone.runtime.blobs import LocalBlobStore
from voxclone.service.audiobooks import BOOK_RATE, assemble_m4b

CHAPTER_S = 360


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=1.0)
    args = parser.parse_args(argv)
    chapters = max(1, round(args.hours * 3600 / CHAPTER_S))
    with tempfile.TemporaryDirectory() as tmp:
        blobs = LocalBlobStore(Path(tmp) / "blobs")
        rng = np.random.default_rng(0)
        keys = []
        for i in range(chapters):
            x = (0.1 * rng.standard_normal(BOOK_RATE * CHAPTER_S)).astype(np.float32)
            buf = io.BytesIO()
            sf.write(buf, x, BOOK_RATE, format="FLAC")
            keys.append(f"jobs/c{i}.flac")
            blobs.put(keys[-1], buf.getvalue(), content_type="audio/flac")
        out = Path(tmp) / "book.m4b"
        started = time.perf_counter()
        titles = [f"Chapter {i + 1}" for i in range(chapters)]
        assemble_m4b(keys, titles, blobs, str(out), title="T")
        took = time.perf_counter() - started
        with av.open(str(out)) as f:
            marks, seconds = len(f.chapters()), (f.duration or 0) / 1e6
        print(
            f"{seconds / 3600:.2f} h in {chapters} chapters assembled in {took:.1f} s "
            f"({took / (seconds / 3600):.0f} s per hour of audio); {marks} chapter marks, "
            f"{out.stat().st_size / 1e6:.1f} MB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
