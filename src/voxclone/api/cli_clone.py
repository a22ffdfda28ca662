"""``voxclone clone a.wav [b.wav …] --name alice [--refine] [--keep-reference]``
and ``voxclone clone more.wav --add-to alice`` (a new version of the voice).

Several files are recordings of the same speaker, pooled into one voice.

Like ``say``, it goes through a running local server when one answers (or
``--server URL``): the models are warm there, so the voice can speak about
half a second after the upload instead of after ~15 s of model loading, and
the quality report (pitch calibration, tone, Whisper) follows from the
server's report job. ``--local`` (or an ``--owner`` other than ``local``,
which only the in-process store can act as) loads the models here.

It prints the new voice in a few lines (which voice speaks, and why; its
similarity and word error rate; warnings), ``--json`` the whole record.
A missing or unreadable file is one line and exit code 2 before anything loads.

Consent: the person running the command attests that the speaker agreed;
the statement (or the default attestation) is recorded as a hash with the
voice, like the HTTP API does.
"""

from __future__ import annotations

import argparse
import getpass
import sys
import time
from pathlib import Path
from typing import Any

from voxclone.api.cli_remote import add_server_options
from voxclone.api.cli_voice_view import print_voice
from voxclone.config import Settings
from voxclone.errors import InvalidInput, NotFound, VoxcloneError
from voxclone.runtime.key_scopes import LOCAL_OWNER

DEFAULT_STATEMENT = (
    "The operator of this command attests that the speaker consented to voice cloning."
)


def add_clone_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "clone", help="clone a voice from recordings of one speaker (1.5–30 s of speech each)"
    )
    p.add_argument(
        "reference", nargs="+", help="audio files of one speaker: wav, mp3, flac, ogg, m4a, …"
    )
    p.add_argument("--name", help="name of the new voice")
    p.add_argument(
        "--add-to",
        metavar="VOICE",
        help="add the recordings to this existing voice (name or id) instead of creating one",
    )
    p.add_argument("--language", default="en-us", help="language the voice will mostly speak")
    p.add_argument("--owner", default=LOCAL_OWNER, help="library owner (default: local)")
    p.add_argument("--model", help="engine to clone for (default: the default engine)")
    p.add_argument(
        "--refine", action="store_true", help="also run the background refinement and wait"
    )
    p.add_argument(
        "--deep",
        action="store_true",
        help="refine by descending on the voice's timbre through the model toward the "
        "recording (needs the [deep] extra; implies --refine)",
    )
    p.add_argument(
        "--budget", type=float, help="refine time budget in seconds (default from settings)"
    )
    p.add_argument(
        "--keep-reference", action="store_true", help="store the raw reference audio too"
    )
    p.add_argument(
        "--no-tone-match",
        dest="match_tone",
        action="store_false",
        help="do not give the clone the recording's tone (a cleaner, more neutral sound)",
    )
    p.add_argument(
        "--keep-clone",
        action="store_true",
        help="keep the clone even where a built-in voice is heard about as close "
        "(by default that built-in, moved toward the recording, speaks instead)",
    )
    p.add_argument(
        "--consent",
        action="store_true",
        help="confirm that the speaker consented to being cloned (required)",
    )
    p.add_argument("--consent-statement", default=DEFAULT_STATEMENT, help="consent text to record")
    p.add_argument("--given-by", default=None, help="who gave consent (default: current user)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the whole voice record as JSON instead of its summary",
    )
    add_server_options(p, "clone")
    p.add_argument(
        "--no-wait",
        dest="wait",
        action="store_false",
        help="through a server: return as soon as the voice can speak; its quality report "
        "follows there (GET /v1/voices/ID)",
    )
    return p


def cmd_clone(args: argparse.Namespace, settings: Settings) -> int:
    if (args.name is None) == (args.add_to is None):
        print("give either --name (a new voice) or --add-to VOICE", file=sys.stderr)
        return 2
    problem = _consent_problem(args)
    if problem is not None:
        print(f"voxclone: error: {problem}", file=sys.stderr)
        return 2
    clips = read_recordings(args.reference)
    try:
        return _clone(args, settings, clips)
    except VoxcloneError as exc:
        raise _in_flag_terms(exc) from None


def read_recordings(paths: list[str]) -> list[bytes]:
    """Each recording's bytes; a file that is missing or cannot be read is a
    one-line error naming it (it was a traceback), before any model loads."""
    clips = []
    for path in paths:
        try:
            clips.append(Path(path).read_bytes())
        except FileNotFoundError:
            raise NotFound(f"no such recording: {path}", field="reference") from None
        except OSError as exc:
            raise InvalidInput(
                f"cannot read the recording {path}: {exc.strerror or exc}", field="reference"
            ) from None
    return clips


def _clone(args: argparse.Namespace, settings: Settings, clips: list[bytes]) -> int:
    from voxclone.bootstrap import build_runtime
    from voxclone.service.voices.request import ConsentInput, EnrollRequest

    if _clone_via_server(args, settings, clips):
        return 0
    runtime = build_runtime(settings, warmup=False)
    service = runtime.voices
    if service is None:  # build_runtime always wires cloning unless told not to
        runtime.close()
        raise VoxcloneError("voice cloning is not available")
    try:
        if args.add_to is not None:
            started = time.perf_counter()
            voice_id = _voice_id(runtime, args.add_to, args.owner)
            record = service.add_recordings(voice_id, args.owner, clips)
            print(
                f"added {len(clips)} recording(s) to '{record.name}' (version {record.version}) "
                f"in {time.perf_counter() - started:.1f} s",
                file=sys.stderr,
            )
            print_voice(record, as_json=args.json)
            return 0
        consent = ConsentInput(
            given=args.consent,
            statement=args.consent_statement,
            given_by=args.given_by or _current_user(),
        )
        started = time.perf_counter()
        record, _ = service.enroll(
            EnrollRequest(
                audio=clips[0],
                extra_audio=tuple(clips[1:]),
                name=args.name,
                owner=args.owner,
                consent=consent,
                language=args.language,
                keep_reference=args.keep_reference,
                match_tone=args.match_tone,
                keep_clone=args.keep_clone,
                model=args.model,
            )
        )
        print(
            f"cloned '{record.name}' as {record.id} for {record.engine} "
            f"in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        if args.refine or args.deep:
            method = "deep" if args.deep else None
            job = service.start_refine(record.id, args.owner, args.budget, method)
            try:
                job = _wait(service, job.id, args.owner)
            except KeyboardInterrupt:
                service.cancel_job(job.id, args.owner)
                job = _wait(service, job.id, args.owner)
            print(f"refine {job.state}: {job.message}", file=sys.stderr)
            record = service.get(record.id, args.owner)
        print_voice(record, as_json=args.json)
    finally:
        runtime.close()
    return 0


def _clone_via_server(args: argparse.Namespace, settings: Settings, clips: list[bytes]) -> bool:
    """Clone through a running server; False if none is there (then clone in-process)."""
    from voxclone.api.cli_jobs import wait_job
    from voxclone.api.cli_remote import (
        CLONE_LOAD,
        RemoteError,
        call_json,
        default_server_url,
        note_local_load,
        server_ready,
    )

    if args.local or args.owner != LOCAL_OWNER:
        note_local_load(None, CLONE_LOAD)
        return False
    explicit = args.server is not None
    url = args.server if explicit else default_server_url(settings)
    if not explicit and not server_ready(url, settings):
        note_local_load(url, CLONE_LOAD)
        return False
    files = [
        ("audio", Path(path).name, clip) for path, clip in zip(args.reference, clips, strict=True)
    ]
    started = time.perf_counter()
    try:
        if args.add_to is not None:
            voice_id = _remote_voice_id(url, args.add_to)
            record = call_json(url, "POST", f"/v1/voices/{voice_id}/recordings", files=files)
            print(
                f"added {len(clips)} recording(s) to '{record['name']}' "
                f"(version {record['version']}) in {time.perf_counter() - started:.1f} s "
                f"via {url}",
                file=sys.stderr,
            )
            print_voice(record, as_json=args.json)
            return True
        form = [
            ("name", args.name),
            ("consent", "true" if args.consent else "false"),
            ("consent_statement", args.consent_statement),
            ("given_by", args.given_by or _current_user()),
            ("language", args.language),
            ("keep_reference", _flag(args.keep_reference)),
            ("match_tone", _flag(args.match_tone)),
            ("keep_clone", _flag(args.keep_clone)),
            ("wait", "false"),  # speakable at once; the report follows in its job
            *([("model", args.model)] if args.model else []),
        ]
        voice = call_json(url, "POST", "/v1/voices", form=form, files=files)
    except RemoteError as exc:
        if not explicit and exc.status in (401, 403):
            print(f"voxclone: {url} needs an API key; cloning in-process", file=sys.stderr)
            return False
        raise
    print(
        f"cloned '{voice['name']}' as {voice['id']} for {voice['engine']} in "
        f"{time.perf_counter() - started:.1f} s via {url}: it can speak now",
        file=sys.stderr,
    )
    report = voice.get("report_job")
    if args.wait and report is not None:
        job = wait_job(url, report["id"], "measuring")
        print(f"quality report {job['state']}: {job['message']}", file=sys.stderr)
    if args.refine or args.deep:
        body: dict[str, object] = {} if args.budget is None else {"budget_s": args.budget}
        if args.deep:
            body["method"] = "deep"
        job = call_json(url, "POST", f"/v1/voices/{voice['id']}/refine", body=body)
        job = wait_job(url, job["id"], "refining")
        print(f"refine {job['state']}: {job['message']}", file=sys.stderr)
    print_voice(call_json(url, "GET", f"/v1/voices/{voice['id']}"), as_json=args.json)
    return True


# Consent fields in the words of the HTTP form and the service, and this
# command's flags for them (longest first: "consent" is in the others).
_CONSENT_FIELDS = frozenset(
    {"consent", "consent_statement", "consent.statement", "given_by", "consent.given_by"}
)
_FLAG_WORDS = (
    ('consent="true"', "--consent"),
    ("consent.statement", "--consent-statement"),
    ("consent_statement", "--consent-statement"),
    ("consent.given_by", "--given-by"),
    ("given_by", "--given-by"),
)


def _consent_problem(args: argparse.Namespace) -> str | None:
    """Why a new voice may not be cloned as asked, in this command's words."""
    if args.add_to is not None:
        return None  # more recordings of a voice whose consent is on record
    if not args.consent:
        return (
            "cloning a voice needs the speaker's consent: add --consent to confirm that "
            "they agreed (--consent-statement TEXT records what they agreed to, "
            "--given-by NAME who agreed)"
        )
    if not args.consent_statement.strip():
        return "--consent-statement must not be empty (leave it out for the default attestation)"
    return None


def _in_flag_terms(exc: VoxcloneError) -> VoxcloneError:
    """A consent error from the server or the service, naming this command's
    flags instead of field names (consent_statement -> --consent-statement)."""
    if exc.field in _CONSENT_FIELDS:
        message = exc.message
        for word, flag in _FLAG_WORDS:
            message = message.replace(word, flag)
        exc.message = message
        exc.args = (message,)
    return exc


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _remote_voice_id(url: str, name_or_id: str) -> str:
    from voxclone.api.cli_remote import call_json

    for voice in call_json(url, "GET", "/v1/voices")["voices"]:
        if voice["name"] == name_or_id:
            return str(voice["id"])
    return name_or_id


def _voice_id(runtime: Any, name_or_id: str, owner: str) -> str:
    found = runtime.voice_store.find_by_name(name_or_id, owner)
    return found.id if found is not None else name_or_id


def _wait(service: Any, job_id: str, owner: str) -> Any:
    last = -1.0
    while True:
        job = service.get_job(job_id, owner)
        if job.progress != last:
            last = job.progress
            print(f"\rrefining {job.progress:5.1f} %", end="", file=sys.stderr, flush=True)
        if job.done:
            print(file=sys.stderr)
            return job
        time.sleep(0.5)


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
