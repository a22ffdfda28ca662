"""``voxclone dialogue script.txt --cast cast.json -o out.wav``: a script spoken by its cast.

The script is plain text, a line per turn::

    # comments and blank lines are skipped
    Alice: Did you hear the news?
    Bob: No. Tell me!
    It had better be good.      <- no name: Bob goes on (the same turn)

The cast maps each name to a voice (a built-in, a clone's id or name, a saved
blend or a blend expression), or to ``{"voice", "speed"?, "emotion"?}``.
The dialogue goes to a running server's ``POST /v1/audio/dialogue`` (as
``say`` does: --server, else the configured local one if it answers), else
it is rendered in this process. A name not in the cast, a line before any
name, or a bad cast is one line on stderr with the line, exit 2.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxclone.api.cli_output import AudioSink, audio_format
from voxclone.api.cli_remote import add_server_options
from voxclone.config import Settings
from voxclone.errors import InvalidInput
from voxclone.runtime.key_scopes import LOCAL_OWNER

# "Name: text": a name is up to 64 characters of letters, digits, spaces and
# . ' - _. A head with a space that is no cast name ("Note the time: noon")
# is text that continues the turn; a one-word head is a name, and must be cast.
_NAMED = re.compile(r"^\s*([\w][\w .'\-]{0,63}?)\s*:\s*(.*)$")


@dataclass(frozen=True)
class ScriptTurn:
    speaker: str
    text: str
    line: int  # where the turn starts, 1-based


def parse_script(text: str, cast: dict[str, Any]) -> list[ScriptTurn]:
    """The script's turns; InvalidInput naming the line for a name not in
    ``cast`` or text before any name."""
    turns: list[ScriptTurn] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        named = _NAMED.match(line)
        if named is not None and (named.group(1) in cast or " " not in named.group(1)):
            name, said = named.group(1), named.group(2).strip()
            if name not in cast:
                names = ", ".join(sorted(cast)) or "none"
                raise InvalidInput(
                    f"line {number}: '{name}' is not in the cast (cast: {names})",
                    field=f"line {number}",
                )
            turns.append(ScriptTurn(name, said, number))
            continue
        if not turns:
            raise InvalidInput(
                f"line {number}: text before any 'Name:' line; start the line with a "
                "cast name and a colon",
                field=f"line {number}",
            )
        last = turns[-1]
        turns[-1] = ScriptTurn(last.speaker, f"{last.text} {line}".strip(), last.line)
    empty = [t for t in turns if not t.text]
    if empty:
        raise InvalidInput(f"line {empty[0].line}: {empty[0].speaker} says nothing")
    if not turns:
        raise InvalidInput("the script has no 'Name: line' turns")
    return turns


def read_cast(path: str) -> dict[str, dict[str, Any]]:
    """name -> {"voice", "speed"?, "emotion"?} from a JSON file."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(raw, dict) or not raw:
        raise InvalidInput(f'{path}: the cast is a JSON object {{"Name": "voice", ...}}')
    cast: dict[str, dict[str, Any]] = {}
    for name, role in raw.items():
        if isinstance(role, str):
            role = {"voice": role}
        if not isinstance(role, dict) or not isinstance(role.get("voice"), str):
            raise InvalidInput(f"{path}: '{name}' needs a voice (a name, or {{\"voice\": ...}})")
        unknown = set(role) - {"voice", "speed", "emotion"}
        if unknown:
            raise InvalidInput(f"{path}: '{name}' has unknown keys {sorted(unknown)}")
        cast[name] = role
    return cast


def dialogue_body(turns: list[ScriptTurn], cast: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``turns`` of a ``/v1/audio/dialogue`` body."""
    return [{**cast[t.speaker], "text": t.text, "speaker": t.speaker} for t in turns]


def add_dialogue_parser(sub: Any) -> None:
    p = sub.add_parser("dialogue", help="speak a 'Name: line' script with a cast of voices")
    p.add_argument("script", help="the script file ('Name: line' per line; - for stdin)")
    p.add_argument("--cast", required=True, help='JSON file {"Name": "voice" or {...}}')
    p.add_argument("-o", "--output", required=True, help="output file (.wav .mp3 .opus .flac)")
    p.add_argument("--format", help="override the format implied by the file name")
    p.add_argument("--rate", type=int, default=24_000, help="16000, 22050, 24000, 44100, 48000")
    p.add_argument("--subtitles", metavar="FILE", help="also write speaker-named .srt or .vtt")
    p.add_argument("--model", help="engine to speak with (default: each voice's)")
    p.add_argument("--language", "-l", help="en-us, en-gb, es, fr, ... (default: detected)")
    add_server_options(p, "speak")


def cmd_dialogue(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_remote import (
        SAY_LOAD,
        call_json,
        default_server_url,
        note_local_load,
        server_ready,
    )

    script = sys.stdin.read() if args.script == "-" else Path(args.script).read_text("utf-8")
    cast = read_cast(args.cast)
    turns = parse_script(script, cast)
    sink = AudioSink(args.output)
    fmt = audio_format(args.output, args.format, False)
    body: dict[str, Any] = {
        "turns": dialogue_body(turns, cast),
        "response_format": fmt,
        "sample_rate": args.rate,
        "model": args.model,
        "language": args.language,
        "timestamps": True,
    }
    body = {k: v for k, v in body.items() if v is not None}
    url = None
    if not args.local:
        url = args.server or default_server_url(settings)
        if args.server is None and not server_ready(url, settings):
            note_local_load(url, SAY_LOAD)
            url = None
    if url is not None:
        answer = call_json(url, "POST", "/v1/audio/dialogue", body=body)
        audio = base64.b64decode(answer["audio"])
        words = answer["timestamps"]
    else:
        audio, words = _local(settings, body)
    with sink.keeping_stdout():
        sink.write(audio)
    if args.subtitles:
        _write_subtitles(args.subtitles, words)
    where = url or "this process"
    print(f"wrote {sink.shown}: {len(turns)} turns, {len(audio)} bytes ({where})", file=sys.stderr)
    return 0


def _local(settings: Settings, body: dict[str, Any]) -> tuple[bytes, list[dict[str, Any]]]:
    from voxclone.api.cli import _runtime
    from voxclone.service.dialogue import Dialogue, Dialogues, Turn
    from voxclone.service.dialogue_captions import speaker_words_json

    dialogue = Dialogue(
        turns=tuple(
            Turn(
                voice=t["voice"],
                text=t["text"],
                speed=t.get("speed"),
                emotion=t.get("emotion", "neutral"),
                speaker=t["speaker"],
            )
            for t in body["turns"]
        ),
        owner=LOCAL_OWNER,
        format=body["response_format"],
        sample_rate=body["sample_rate"],
        model=body.get("model"),
        language=body.get("language"),
    )
    runtime = _runtime(settings)
    try:
        service = Dialogues(
            runtime.speech,
            max_output_s=settings.max_output_s,
            max_text_chars=settings.max_text_chars,
        )
        result = service.synthesize(service.prepare(dialogue), timestamps=True)
    finally:
        runtime.close()
    return result.audio, speaker_words_json(result.words)


def _write_subtitles(path: str, timestamps: list[dict[str, Any]]) -> None:
    from voxclone.service.dialogue import SpeakerWord
    from voxclone.service.dialogue_captions import speaker_srt, speaker_vtt

    words = [
        SpeakerWord(w["speaker"], w["turn"], w["word"], w["start_time"], w["end_time"])
        for w in timestamps
    ]
    text = speaker_vtt(words) if path.lower().endswith(".vtt") else speaker_srt(words)
    Path(path).write_text(text, encoding="utf-8")
