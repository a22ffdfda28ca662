"""``voxclone wyoming``: serve speech to Home Assistant over the Wyoming protocol.

Wyoming carries no credentials, so whose cloned voices a server offers is
decided here, once, by the operator: ``--api-key`` (an active key with the
``tts`` scope: its owner's library), ``--owner`` (a tenant named directly,
e.g. ``local`` for voices cloned with the CLI), or neither (built-in voices
only). No other owner's voice is ever listed or spoken.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Any, NoReturn

from voxclone.config import Settings
from voxclone.errors import InvalidInput, Unauthorized

log = logging.getLogger("voxclone.wyoming")

DEFAULT_URI = "tcp://127.0.0.1:10200"


def add_wyoming_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "wyoming",
        help="serve TTS to Home Assistant over the Wyoming protocol",
        description="Speak the Wyoming protocol (describe, synthesize, streaming synthesize). "
        "Wyoming has no API keys: the cloned voices of ONE owner, chosen here, are offered "
        "to every client that reaches the socket; without --api-key/--owner only the "
        "built-in voices are.",
    )
    p.add_argument(
        "--uri",
        default=DEFAULT_URI,
        help=f"where to listen: tcp://HOST:PORT or unix://PATH (default {DEFAULT_URI}); "
        "only this address is bound",
    )
    who = p.add_mutually_exclusive_group()
    who.add_argument(
        "--api-key",
        metavar="KEY",
        help="offer the cloned voices of this key's owner (an active key with the tts scope)",
    )
    who.add_argument(
        "--owner",
        metavar="OWNER",
        help="offer the cloned voices of this owner (e.g. 'local': voices cloned with the CLI)",
    )
    p.add_argument(
        "--zeroconf",
        nargs="?",
        const="",
        metavar="NAME",
        help="announce the server over mDNS for Home Assistant discovery (off by default; "
        "needs the optional 'zeroconf' package and a tcp:// URI)",
    )
    return p


def exposed_owner(args: argparse.Namespace, settings: Settings) -> str:
    """The one owner whose library this server offers (BUILTINS_ONLY for none)."""
    from voxclone.api.wyoming_server import BUILTINS_ONLY

    if args.owner is not None:
        if not args.owner.strip():
            raise InvalidInput("--owner must name an owner", field="owner")
        return str(args.owner)
    if args.api_key is None:
        return BUILTINS_ONLY
    from voxclone.key_setup import open_key_store
    from voxclone.runtime.key_scopes import SCOPE_TTS

    with open_key_store(settings) as store:
        record = store.authenticate(args.api_key)
    if record is None:
        raise Unauthorized("--api-key is not an active API key of this server")
    if not record.allows(SCOPE_TTS):
        raise Unauthorized(f"API key {record.id} lacks the 'tts' scope")
    return record.owner


def cmd_wyoming(args: argparse.Namespace, settings: Settings) -> int:
    from wyoming.server import AsyncServer

    from voxclone.api.wyoming_server import (
        BUILTINS_ONLY,
        WyomingTts,
        check_zeroconf,
        serve_wyoming,
    )
    from voxclone.bootstrap import build_runtime

    try:
        AsyncServer.from_uri(args.uri)  # a malformed URI fails before the models load
    except ValueError as exc:
        raise InvalidInput(f"--uri: {exc}", field="uri") from exc
    if args.zeroconf is not None:
        check_zeroconf(args.uri)
    owner = exposed_owner(args, settings)
    # The same composition root as `serve`; no cloning models (Wyoming only speaks).
    runtime = build_runtime(settings, warmup=True, with_voices=False)
    runtime.speech.calibrate_in_background()  # admission plans with this machine's speed
    try:
        tts = WyomingTts.from_runtime(runtime, owner)
        whose = "built-in voices only" if owner == BUILTINS_ONLY else f"voices of owner {owner}"

        def ready(_server: object) -> None:
            print(f"voxclone wyoming: listening on {args.uri} ({whose})", flush=True)

        asyncio.run(serve_wyoming(tts, args.uri, ready=ready, zeroconf=args.zeroconf))
    finally:
        runtime.close()
    end_process(0)
    return 0  # not reached


def end_process(code: int) -> NoReturn:
    """End the process now that everything of ours is closed and flushed.

    Daemon threads may still be inside native code when SIGTERM comes soon
    after the start (the watermark's ONNX session being built, the rate
    calibration on a slow host); the C++ runtime's exit-time destructors then
    abort the process: SIGABRT, "terminate called without an active
    exception", in 2 of ~8 CI runs (sessions 25 and 26, the slow evenings).
    ``os._exit`` skips those destructors; the database and files were closed
    by ``runtime.close()``."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
