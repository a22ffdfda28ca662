"""``voxclone detect FILE``: is this audio voxclone's (watermarked) output?

Runs the detector here (no server: the same code as ``POST
/v1/provenance/detect``, service/provenance.py) and prints its JSON answer.
Exit 0 when the watermark is found, 1 when it is not (2 for a file that is
not audio, as every command).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from voxclone.config import Settings

EXIT_MARKED = 0
EXIT_NOT_MARKED = 1


def add_detect_parser(subparsers: Any) -> argparse.ArgumentParser:
    detect = subparsers.add_parser(
        "detect",
        help="check an audio file for voxclone's watermark (exit 0 marked, 1 not)",
    )
    detect.add_argument("file", type=Path, help="the audio file (any common format)")
    return detect


def cmd_detect(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.service.provenance import detect

    data = Path(args.file).read_bytes()
    report = detect(
        data,
        max_bytes=max(len(data), 1),  # a local file: only its length is limited
        max_seconds=max(settings.max_reference_seconds, 3600.0),
    )
    print(
        json.dumps(
            {
                "watermarked": report.watermarked,
                "confidence": report.confidence,
                "payload": report.payload,
            }
        )
    )
    return EXIT_MARKED if report.watermarked else EXIT_NOT_MARKED
