"""The ``voxclone`` command line: serve | wyoming | say | clone | voices | keys | models | db
| lexicon.

Every command exits 0 on success and otherwise with one line on stderr and
a documented exit code (``api/cli_exit.py``, shown by ``voxclone --help``):
2 for a mistake in what was asked, 3 for a server that does not answer, 4
for a port ``serve`` cannot take, 1 for a failure of the work itself;
tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from voxclone.api.cli_exit import (
    EPILOG,
    EXIT_CANNOT_LISTEN,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    exit_code,
    file_problem,
)
from voxclone.api.cli_output import STDOUT, AudioSink, audio_format
from voxclone.api.cli_remote import add_server_options
from voxclone.config import Settings
from voxclone.errors import InvalidInput, VoxcloneError
from voxclone.runtime.key_scopes import LOCAL_OWNER
from voxclone.runtime.private_home import secure_home

if TYPE_CHECKING:
    from voxclone.engine_setup import EngineLoad

__all__ = ["EXIT_FAILED", "EXIT_USAGE", "main"]

Handler = Callable[[argparse.Namespace, Settings], int]


def _add_control_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--voice",
        help="built-in voice name, cloned voice name or id, or a blend such as 'a(2)+b(1)'",
    )
    p.add_argument("--model", help="engine to speak with (default: the voice's own engine)")
    p.add_argument("--language", "-l", help="en-us, en-gb, es, fr, it, pt-br, hi, ja, zh")
    p.add_argument("--speed", type=float, help="0.5–2.0")
    p.add_argument("--pitch", type=float, help="−0.5…+0.5 octave")
    p.add_argument("--energy", type=float, help="0.8–1.2")
    p.add_argument("--emotion", default="neutral", help="neutral, happy, sad, angry, …")
    p.add_argument("--intensity", type=float, default=1.0, help="0–1 strength of the emotion")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="voxclone",
        description="zero-shot voice-cloning TTS",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--verbose", "-v", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    say = sub.add_parser("say", help="speak text into an audio file")
    say.add_argument("text", nargs="?", help="the text, or - to read standard input")
    say.add_argument(
        "--stream-in",
        action="store_true",
        help="speak standard input as it arrives (llm | voxclone say --stream-in -o -): "
        "through the server's stream-input WebSocket, or in this process without one",
    )
    say.add_argument(
        "-o",
        "--output",
        required=True,
        help=f"output file (.wav .mp3 .opus .flac .pcm), or {STDOUT} for standard output (WAV)",
    )
    encoding = say.add_mutually_exclusive_group()
    encoding.add_argument("--format", help="override the format implied by the file name")
    encoding.add_argument(
        "--raw",
        action="store_true",
        help="raw 16-bit little-endian mono PCM at --rate, no header (like Piper's "
        "--output-raw: -o - --raw | aplay -r 24000 -f S16_LE -c 1 -t raw)",
    )
    say.add_argument("--rate", type=int, default=24_000, help="16000, 22050, 24000, 44100, 48000")
    say.add_argument(
        "--subtitles",
        metavar="FILE",
        help="also write word-timed subtitles (.srt, or WebVTT for .vtt)",
    )
    add_server_options(say, "speak")
    markup = say.add_mutually_exclusive_group()
    markup.add_argument(
        "--ssml",
        dest="ssml",
        action="store_const",
        const=True,
        help="the text is SSML (a fragment is wrapped in <speak>); default: SSML when "
        "it starts with <speak>",
    )
    markup.add_argument(
        "--plain",
        dest="ssml",
        action="store_const",
        const=False,
        help="read the text as plain text even if it starts with <speak>",
    )
    _add_control_args(say)

    voices = sub.add_parser("voices", help="list, show, delete or blend voices")
    vsub = voices.add_subparsers(dest="voices_command", required=True)
    listing = vsub.add_parser("list", help="built-in and cloned voices")
    listing.add_argument(
        "--language",
        "-l",
        help="only voices of this language (en-us, en-gb, es, fr, hi, it, ja, pt-br, zh; "
        "'en' for both Englishes)",
    )
    show = vsub.add_parser(
        "show", help="a cloned voice: which voice speaks, its quality figures and warnings"
    )
    show.add_argument("voice", help="the voice's name or id")
    show.add_argument(
        "--json", action="store_true", help="the whole record as JSON instead of a summary"
    )
    delete = vsub.add_parser(
        "delete",
        help="delete a cloned voice and its cached audio (and saved blends made from it)",
    )
    delete.add_argument("voice", help="the voice's name or id")
    for named in (show, delete):
        named.add_argument(
            "--owner",
            default=LOCAL_OWNER,
            help="whose voice a name means (default: local; an id finds any owner's)",
        )
    blend = vsub.add_parser(
        "blend", help="save a blend such as 'alice(2)+clear_male(1)' as a library voice"
    )
    blend.add_argument("name", help="the new voice's name")
    blend.add_argument("expression", help="voices and weights, e.g. 'alice(2)+clear_male(1)'")
    blend.add_argument("--owner", default=LOCAL_OWNER, help="library owner (default: local)")
    blend.add_argument("--language", help="default: the parts' language")

    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    serve.add_argument(
        "--log-format",
        choices=("auto", "json", "text"),
        help="log lines as text or JSON (default auto: text on a terminal, else JSON; "
        "VOXCLONE_LOG_FORMAT)",
    )

    from voxclone.api.cli_audiobook import add_audiobook_parser
    from voxclone.api.cli_clone import add_clone_parser
    from voxclone.api.cli_db import add_db_parser
    from voxclone.api.cli_detect import add_detect_parser
    from voxclone.api.cli_dialogue import add_dialogue_parser
    from voxclone.api.cli_keys import add_keys_parser
    from voxclone.api.cli_lexicon import add_lexicon_parser
    from voxclone.api.cli_models import add_models_parser
    from voxclone.api.cli_receipt import add_verify_receipt_parser
    from voxclone.api.cli_wyoming import add_wyoming_parser

    add_keys_parser(sub)
    add_models_parser(sub)
    add_clone_parser(sub)
    add_db_parser(sub)
    add_lexicon_parser(sub)
    add_wyoming_parser(sub)
    add_dialogue_parser(sub)
    add_audiobook_parser(sub)
    add_detect_parser(sub)
    add_verify_receipt_parser(sub)
    return parser


def _runtime(
    settings: Settings, *, warmup: bool = False, engine_load: EngineLoad | None = None
) -> Any:
    from voxclone.bootstrap import build_runtime

    # Speaking needs no cloning models (~0.5 GB); `clone` builds its own runtime.
    return build_runtime(settings, warmup=warmup, with_voices=False, engine_load=engine_load)


def _read_text(arg: str) -> str:
    if arg == "-":
        return sys.stdin.read()
    return arg


def _controls(args: argparse.Namespace) -> Any:
    from voxclone.synth.controls import SpeechControls

    return SpeechControls(
        speed=args.speed,
        pitch=args.pitch,
        energy=args.energy,
        emotion=args.emotion,
        intensity=args.intensity,
    )


def _server_for_say(args: argparse.Namespace, settings: Settings) -> str | None:
    """The server ``say`` speaks through: --server, else the configured local
    one if it is ready; None to speak in-process (said on stderr first)."""
    from voxclone.api.cli_remote import SAY_LOAD, default_server_url, note_local_load, server_ready

    if args.local:
        note_local_load(None, SAY_LOAD)
        return None
    if args.server is not None:
        return str(args.server)
    url = default_server_url(settings)
    if server_ready(url, settings):
        return url
    note_local_load(url, SAY_LOAD)
    return None


def _say_via_server(args: argparse.Namespace, url: str, text: str, sink: AudioSink) -> bool:
    """Speak through the server at ``url``; False if the configured local
    server refuses this CLI (then speak in-process)."""
    from voxclone.api.cli_say_remote import say_via_server

    body = {
        "voice": args.voice,
        "model": args.model,
        "language": args.language,
        "speed": args.speed,
        "pitch": args.pitch,
        "energy": args.energy,
        "emotion": args.emotion,
        "intensity": args.intensity,
        "format": audio_format(args.output, args.format, args.raw),
        "sample_rate": args.rate,
        "timestamps": True if args.subtitles else None,
        "ssml": args.ssml,
    }
    return say_via_server(args, url, text, body, sink)


def _write_subtitles(path: str, words: Any) -> None:
    from voxclone.api.cli_say_remote import write_subtitles

    write_subtitles(path, words)


def cmd_say(args: argparse.Namespace, settings: Settings) -> int:
    sink = AudioSink(args.output)  # stdout as it is, before keeping_stdout moves it
    if args.stream_in:
        from voxclone.api.cli_stream_in import check_args, say_stream_in

        check_args(args)
        with sink.keeping_stdout():
            return say_stream_in(args, settings, _server_for_say(args, settings), sink)
    if args.text is None:
        raise InvalidInput(
            "say needs the text, - to read standard input, or --stream-in", field="text"
        )
    text = _read_text(args.text)
    try:
        with sink.keeping_stdout():
            url = _server_for_say(args, settings)
            return _say(args, settings, text, url, sink)
    except VoxcloneError as exc:
        from voxclone.api.cli_suggest import voice_missing, with_suggestion

        if not args.voice or not voice_missing(exc):
            raise
        raise with_suggestion(exc, args.voice, _voice_names(settings, url, exc)) from None


def _voice_names(settings: Settings, url: str | None, exc: VoxcloneError) -> list[str]:
    """Names to suggest for a voice that was not found where it was looked up;
    none if they cannot be had (a hint is not worth a second error)."""
    from voxclone.api.cli_remote import RemoteError
    from voxclone.api.cli_suggest import local_voice_names, server_voice_names

    try:
        if url is not None and isinstance(exc, RemoteError):
            return server_voice_names(url)
        return local_voice_names(settings, LOCAL_OWNER)
    except Exception:
        return []


def _say(
    args: argparse.Namespace, settings: Settings, text: str, url: str | None, sink: AudioSink
) -> int:
    engine_load = None
    if url is None:
        from voxclone.engine_setup import EngineLoad

        # Speaking in-process: the model loads while the rest is imported
        # (engine_setup.py: ~0.3 s of a 2-core `say`).
        engine_load = EngineLoad(settings)
    from voxclone.service.speech.service import SpeechRequest, ssml_warnings

    # Markup errors before the text goes anywhere; ignored tags on stderr.
    for warning in ssml_warnings(SpeechRequest(text=text, ssml=args.ssml)):
        print(f"voxclone: SSML: {warning}", file=sys.stderr)
    if url is not None and _say_via_server(args, url, text, sink):
        return 0
    request = SpeechRequest(
        text=text,
        voice=args.voice,
        model=args.model,
        language=args.language,
        controls=_controls(args),
        format=audio_format(args.output, args.format, args.raw),
        sample_rate=args.rate,
        owner=LOCAL_OWNER,
        ssml=args.ssml,
    )
    runtime = _runtime(settings, engine_load=engine_load)
    try:
        if args.subtitles:
            captioned = runtime.speech.synthesize_captioned(request)
            _write_subtitles(args.subtitles, captioned.words)
            result = captioned
        else:
            progress = _progress_bar(runtime.speech.text_size(request))
            result = runtime.speech.synthesize(
                request, progress=progress.update if progress else None
            )
            if progress:
                progress.close()
    finally:
        runtime.close()
    sink.write(result.audio)
    print(f"wrote {sink.shown} ({len(result.audio)} bytes, {result.content_type})", file=sys.stderr)
    return 0


def _progress_bar(total: int) -> Any:
    # A bar only where a person watches and the text is long enough to wait for.
    if not sys.stderr.isatty() or total < 400:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="char", desc="speaking", file=sys.stderr)


def cmd_voices(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.bootstrap import build_library

    library = build_library(settings)
    try:
        if args.voices_command == "list":
            from voxclone.api.cli_voices import print_voices

            return print_voices(library.catalog.listing(owner=None), args.language)
        if args.voices_command == "blend":
            from voxclone.service.voices.saved_blends import save_blend

            record = save_blend(
                library.catalog,
                library.store,
                name=args.name,
                expression=args.expression,
                owner=args.owner,
                language=args.language,
            )
            print(f"saved {record.id} ({record.name}): blend of {args.expression.strip()}")
            return 0
        # An id finds the voice whatever its owner; a name is the owner's.
        found = library.catalog.find_stored(args.voice, owner=None)
        if found is None:
            found = library.catalog.find_stored(args.voice, owner=args.owner)
        if found is None:
            from voxclone.errors import InvalidInput, NotFound

            if args.voice in library.catalog.builtin_names:
                raise InvalidInput(f"'{args.voice}' is a built-in voice", field="voice")
            from voxclone.api.cli_suggest import did_you_mean

            stored = [v.name for v in library.store.list(args.owner)]
            raise NotFound(
                f"voice '{args.voice[:64]}' not found among {args.owner}'s voices"
                + did_you_mean(args.voice, stored),
                field="voice",
            )
        store = library.store
        if args.voices_command == "show":
            from voxclone.api.cli_voice_view import print_voice

            print_voice(store.get(found.id, None), as_json=args.json)
            return 0
        # Saved blends made from the voice are derived from it: they go too.
        deleted, *derived = store.delete_with_derived(found.id, None)
        from voxclone.service.purge import CachePurger

        # The deletion journaled the purges (cached audio and blobs); a running
        # server finishes them if a cache tier (Redis) or the blob store (S3)
        # cannot be reached from here now.
        purger = CachePurger(store, library.purge_voice)
        if not all([purger.purge(gone.id) for gone in (deleted, *derived)]):
            print("purge pending: a cache tier or the blob store is unreachable; it is retried")
        print(f"deleted {deleted.id} ({deleted.name})")
        for gone in derived:
            print(f"deleted {gone.id} ({gone.name}): a saved blend made from it")
        return 0
    finally:
        library.close()


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.listen_socket import bind_socket, cannot_listen

    if args.host:
        settings.host = args.host
    if args.port:
        settings.port = args.port
    if args.log_format:
        settings.log_format = args.log_format
    # The port first, before the server's imports: a taken one is said at once.
    try:
        listening = bind_socket(settings.host, settings.port)
    except OSError as exc:
        print(f"voxclone: error: {cannot_listen(settings, exc)}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN
    from voxclone.api.server import serve

    return serve(settings, listening)


def cmd_keys(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_keys import cmd_keys as run_keys

    return run_keys(args, settings)


def cmd_clone(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_clone import cmd_clone as run_clone

    return run_clone(args, settings)


def cmd_models(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_models import cmd_models as run_models

    return run_models(args, settings)


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_db import cmd_db as run_db

    return run_db(args, settings)


def cmd_lexicon(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_lexicon import cmd_lexicon as run_lexicon

    return run_lexicon(args, settings)


def cmd_detect(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_detect import cmd_detect as run_detect

    return run_detect(args, settings)


def cmd_verify_receipt(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_receipt import cmd_verify_receipt as run_verify

    return run_verify(args, settings)


def cmd_dialogue(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_dialogue import cmd_dialogue as run_dialogue

    return run_dialogue(args, settings)


def cmd_audiobook(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_audiobook import cmd_audiobook as run_audiobook

    return run_audiobook(args, settings)


def cmd_wyoming(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_wyoming import cmd_wyoming as run_wyoming

    return run_wyoming(args, settings)


COMMANDS: dict[str, Handler] = {
    "say": cmd_say,
    "voices": cmd_voices,
    "serve": cmd_serve,
    "keys": cmd_keys,
    "clone": cmd_clone,
    "models": cmd_models,
    "db": cmd_db,
    "lexicon": cmd_lexicon,
    "wyoming": cmd_wyoming,
    "dialogue": cmd_dialogue,
    "audiobook": cmd_audiobook,
    "detect": cmd_detect,
    "verify-receipt": cmd_verify_receipt,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    settings = Settings()
    secure_home(settings.home)
    try:
        return COMMANDS[args.command](args, settings)
    except VoxcloneError as exc:
        print(f"voxclone: error: {exc.message}", file=sys.stderr)
        return exit_code(exc)
    except BrokenPipeError:
        # The reader of `-o -` stopped early (`| head`): stdout goes to
        # /dev/null so the exit does not fail once more flushing it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except OSError as exc:
        # A file the user named (missing, unreadable, a directory) or a broken
        # pipe: one line, not a traceback; -v logs where it came from.
        logging.getLogger("voxclone.cli").info("file-system error", exc_info=True)
        message, code = file_problem(exc)
        print(f"voxclone: error: {message}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        print("voxclone: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
