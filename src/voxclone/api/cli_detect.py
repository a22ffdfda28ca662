"""``voxclone detect FILE``: is this audio voxclone's (watermarked) output?

Runs the detector here (no server: the same code as ``POST
/v1/provenance/detect``, service/provenance.py) and prints its JSON answer,
with the C2PA manifest read and verified (``manifest``; its ``signer`` names
this home's key when it signed the file). Exit 0 when the watermark is found
or a valid manifest says AI-generated, 1 when neither (2 for a file that is
not audio, as every command). A manifest that fails verification does not
count: its ``valid`` is false and ``problems`` names what failed.
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
    from voxclone.api.routes_provenance import own_credential
    from voxclone.service.provenance import detect

    data = Path(args.file).read_bytes()
    report = detect(
        data,
        max_bytes=max(len(data), 1),  # a local file: only its length is limited
        max_seconds=max(settings.max_reference_seconds, 3600.0),
        own=own_credential(settings),
    )
    print(
        json.dumps(
            {
                "watermarked": report.watermarked,
                "confidence": report.confidence,
                "payload": report.payload,
                "manifest": report.manifest.as_dict(),
            }
        )
    )
    return EXIT_MARKED if report.ai_generated else EXIT_NOT_MARKED
