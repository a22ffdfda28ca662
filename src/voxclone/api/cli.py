"""The ``voxclone`` command line: serve | say | clone | voices | keys | bench.

Every command exits 0 on success and non-zero with a one-line reason on bad
input; tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from voxclone.config import Settings
from voxclone.errors import VoxcloneError

LOCAL_OWNER = "local"  # the owner of voices created without API keys (CLI, loopback API)
EXIT_USAGE = 2
EXIT_FAILED = 1

Handler = Callable[[argparse.Namespace, Settings], int]


def _add_control_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--voice", help="built-in voice name, cloned voice name or id")
    p.add_argument("--language", "-l", help="en-us, en-gb, es, fr, it, pt-br, hi, ja, zh")
    p.add_argument("--speed", type=float, help="0.5–2.0")
    p.add_argument("--pitch", type=float, help="−0.5…+0.5 octave")
    p.add_argument("--energy", type=float, help="0.8–1.2")
    p.add_argument("--emotion", default="neutral", help="neutral, happy, sad, angry, …")
    p.add_argument("--intensity", type=float, default=1.0, help="0–1 strength of the emotion")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voxclone", description="zero-shot voice-cloning TTS")
    parser.add_argument("--verbose", "-v", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    say = sub.add_parser("say", help="speak text into an audio file")
    say.add_argument("text", help="the text, or - to read standard input")
    say.add_argument(
        "-o", "--output", required=True, help="output file (.wav .mp3 .opus .flac .pcm)"
    )
    say.add_argument("--format", help="override the format implied by the file name")
    say.add_argument("--rate", type=int, default=24_000, help="16000, 22050, 24000, 44100, 48000")
    _add_control_args(say)

    voices = sub.add_parser("voices", help="list, show or delete voices")
    vsub = voices.add_subparsers(dest="voices_command", required=True)
    vsub.add_parser("list", help="built-in and cloned voices")
    show = vsub.add_parser("show", help="details and quality report of a cloned voice")
    show.add_argument("voice")
    delete = vsub.add_parser("delete", help="delete a cloned voice and its cached audio")
    delete.add_argument("voice")

    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")

    from voxclone.api.cli_clone import add_clone_parser
    from voxclone.api.cli_keys import add_keys_parser

    add_keys_parser(sub)
    add_clone_parser(sub)
    return parser


def _runtime(settings: Settings, *, warmup: bool = False) -> Any:
    from voxclone.bootstrap import build_runtime

    # Speaking needs no cloning models (~0.5 GB); `clone` builds its own runtime.
    return build_runtime(settings, warmup=warmup, with_voices=False)


def _read_text(arg: str) -> str:
    if arg == "-":
        return sys.stdin.read()
    return arg


def _format_from(path: str, explicit: str | None) -> str:
    if explicit:
        return explicit.lower()
    suffix = Path(path).suffix.lower().lstrip(".")
    return {"ogg": "opus", "raw": "pcm", "": "wav"}.get(suffix, suffix)


def _controls(args: argparse.Namespace) -> Any:
    from voxclone.synth.controls import SpeechControls

    return SpeechControls(
        speed=args.speed,
        pitch=args.pitch,
        energy=args.energy,
        emotion=args.emotion,
        intensity=args.intensity,
    )


def cmd_say(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.service.speech import SpeechRequest

    text = _read_text(args.text)
    request = SpeechRequest(
        text=text,
        voice=args.voice,
        language=args.language,
        controls=_controls(args),
        format=_format_from(args.output, args.format),
        sample_rate=args.rate,
        owner=LOCAL_OWNER,
    )
    runtime = _runtime(settings)
    try:
        progress = _progress_bar(runtime.speech.text_size(request))
        result = runtime.speech.synthesize(request, progress=progress.update if progress else None)
        if progress:
            progress.close()
    finally:
        runtime.close()
    Path(args.output).write_bytes(result.audio)
    print(
        f"wrote {args.output} ({len(result.audio)} bytes, {result.content_type})", file=sys.stderr
    )
    return 0


def _progress_bar(total: int) -> Any:
    # A bar only where a person watches and the text is long enough to wait for.
    if not sys.stderr.isatty() or total < 400:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="char", desc="speaking", file=sys.stderr)


def cmd_voices(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.runtime.voice_store import SqliteVoiceStore
    from voxclone.service.catalog import VoiceCatalog
    from voxclone.synth.engine.assets import load_packs
    from voxclone.synth.voice.builtin import builtin_voices

    settings.home.mkdir(parents=True, exist_ok=True)
    store = SqliteVoiceStore(settings.db_path)
    try:
        catalog = VoiceCatalog(builtin_voices(load_packs()), store)
        if args.voices_command == "list":
            for item in catalog.listing(owner=None):
                kind = "built-in" if item.builtin else f"cloned v{item.version}"
                print(f"{item.id:24s} {item.name:20s} {kind:12s} {item.description}")
            return 0
        resolved = catalog.resolve(args.voice, owner=None)
        if resolved.builtin:
            raise VoxcloneError(f"'{args.voice}' is a built-in voice")
        if args.voices_command == "show":
            import json

            record = store.get(resolved.id, None)
            print(
                json.dumps(
                    {
                        "id": record.id,
                        "name": record.name,
                        "language": record.language,
                        "version": record.version,
                        "source": record.source,
                        "created_at": record.created_at,
                        "quality": record.quality,
                    },
                    indent=2,
                )
            )
            return 0
        deleted = store.delete(resolved.id, None)
        from voxclone.bootstrap import build_cache

        cache = build_cache(settings)
        if cache is not None:
            from voxclone.service.purge import CachePurger

            # The deletion journaled the purge; a running server finishes it
            # if a tier (Redis) cannot be reached from here now.
            if not CachePurger(store, cache.invalidate_voice).purge(deleted.id):
                print("cached audio purge pending: a cache tier is unreachable; it is retried")
        print(f"deleted {deleted.id} ({deleted.name})")
        return 0
    finally:
        store.close()


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.server import serve

    if args.host:
        settings.host = args.host
    if args.port:
        settings.port = args.port
    return serve(settings)


def cmd_keys(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_keys import cmd_keys as run_keys

    return run_keys(args, settings)


def cmd_clone(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_clone import cmd_clone as run_clone

    return run_clone(args, settings)


COMMANDS: dict[str, Handler] = {
    "say": cmd_say,
    "voices": cmd_voices,
    "serve": cmd_serve,
    "keys": cmd_keys,
    "clone": cmd_clone,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    settings = Settings()
    try:
        return COMMANDS[args.command](args, settings)
    except VoxcloneError as exc:
        print(f"voxclone: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if exc.status < 500 else EXIT_FAILED
    except KeyboardInterrupt:
        print("voxclone: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
