"""``voxclone verify-receipt FILE``: was this deletion receipt signed by the
server's key, unchanged?

The key is, in order: ``--key PEM`` (a certificate chain or a public key, as
``GET /v1/provenance/public-key`` gives), ``--server URL`` (fetched from that
route), else this home's own signing key (the server that runs here). Prints
the check as JSON; exit 0 valid, 1 invalid (a changed byte, another key, not a
receipt), 2 when no key could be found or the file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

from voxclone.config import Settings

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_NO_KEY = 2


def add_verify_receipt_parser(subparsers: Any) -> argparse.ArgumentParser:
    verify = subparsers.add_parser(
        "verify-receipt",
        help="check a voice deletion receipt's signature (exit 0 valid, 1 invalid)",
    )
    verify.add_argument("file", type=Path, help="the receipt (JSON, as DELETE returned it)")
    source = verify.add_mutually_exclusive_group()
    source.add_argument("--key", type=Path, help="the server's certificate chain or public key")
    source.add_argument("--server", help="fetch the key from this server's public-key route")
    return verify


def cmd_verify_receipt(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.service.deletion_receipt import verify_receipt

    try:
        document = Path(args.file).read_bytes()
    except OSError as exc:
        print(f"cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return EXIT_NO_KEY
    pem = _key_pem(args, settings)
    if pem is None:
        return EXIT_NO_KEY
    check = verify_receipt(document, pem)
    print(json.dumps(check.as_dict()))
    return EXIT_VALID if check.valid else EXIT_INVALID


def _key_pem(args: argparse.Namespace, settings: Settings) -> bytes | None:
    if args.key is not None:
        try:
            return Path(args.key).read_bytes()
        except OSError as exc:
            print(f"cannot read {args.key}: {exc.strerror}", file=sys.stderr)
            return None
    if args.server:
        url = f"{args.server.rstrip('/')}/v1/provenance/public-key"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (user's URL)
                return str(json.loads(response.read())["certificate_chain_pem"]).encode()
        except (OSError, ValueError, KeyError) as exc:
            print(f"cannot fetch the key from {url}: {exc}", file=sys.stderr)
            return None
    from voxclone.runtime.signing_key import load_existing

    try:
        own = load_existing(
            settings.home, cert_path=settings.signing_cert, key_path=settings.signing_key
        )
    except (OSError, ValueError) as exc:
        print(f"cannot read this home's signing key: {exc}", file=sys.stderr)
        return None
    if own is None:
        print("no signing key in this home: give --key PEM or --server URL", file=sys.stderr)
        return None
    return own.chain_pem
