"""``voxclone say`` through a running server, for short and long texts alike.

A short text is one ``POST /v1/tts``: the whole file in one answer. That route
must finish within the server's request deadline (30 s by default), which on
a busy 2-core machine is about a thousand characters; the server refuses a
longer text at once (413), or gives up at the deadline (504) when it admitted
a text that then ran late. So a text above :data:`LONG_TEXT_CHARS`, or one the
server refused or ran out of time for, is spoken the way long texts are meant
to go through the API, with its progress on stderr:

* a speech job (``POST /v1/jobs/speech``): no deadline, durable, progress in
  per cent; the audio is downloaded from the job's signed link;
* a stream with word timestamps (``/v1/tts`` with ``stream`` and
  ``timestamps``) where a job cannot say the same thing: ``--subtitles``
  (a job returns no word times) and ``--plain`` text that looks like SSML
  (a job reads such text as SSML). A stream only has to start within the
  deadline; its progress is the share of the text's words spoken.
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import sys
from pathlib import Path
from typing import Any

from voxclone.api.cli_jobs import Progress, sse_events, wait_job
from voxclone.api.cli_output import AudioSink
from voxclone.api.cli_remote import (
    RemoteError,
    call_json,
    download,
    opened_stream,
    speak_remote,
)

# Above this many characters a text goes straight to the long-text path (the
# synchronous route refused ~1,050 characters under load on 2 cores); below
# it the server's own 413 still switches paths.
LONG_TEXT_CHARS = 900


def say_via_server(
    args: argparse.Namespace, url: str, text: str, body: dict[str, Any], sink: AudioSink
) -> bool:
    """Speak ``text`` through the server at ``url`` into ``sink``; False
    if the configured local server refuses this CLI (then speak in-process).

    ``body`` is the ``/v1/tts`` request without ``text``.
    """
    explicit = args.server is not None
    try:
        if len(text) <= LONG_TEXT_CHARS:
            try:
                _say_short(args, url, {**body, "text": text}, sink)
                return True
            except RemoteError as exc:
                if not _too_long(exc):
                    raise
                print(
                    f"voxclone: {exc.message}; speaking it as a long text instead",
                    file=sys.stderr,
                )
        _say_long(args, url, text, body, sink)
        return True
    except RemoteError as exc:
        if not explicit and exc.status in (401, 403):
            # The local server wants a key we do not have: speaking in-process needs none.
            print(f"voxclone: {url} needs an API key; speaking in-process", file=sys.stderr)
            return False
        raise


def _too_long(exc: RemoteError) -> bool:
    """The server's 413 naming the text (too long for the request deadline; a
    text above the hard maximum is then refused by the job route with its own
    message) or its 504 (the deadline passed): a job or a stream has none."""
    return (exc.status == 413 and exc.field == "text") or exc.status == 504


def _say_short(args: argparse.Namespace, url: str, body: dict[str, Any], sink: AudioSink) -> None:
    result = speak_remote(url, body)
    audio, content_type = result.audio, result.content_type
    if args.subtitles:
        # The answer is JSON carrying the audio and its own content type.
        audio, content_type = _subtitled_audio(args.subtitles, json.loads(audio))
    sink.write(audio)
    _wrote(sink, len(audio), content_type, url)


def _say_long(
    args: argparse.Namespace, url: str, text: str, body: dict[str, Any], sink: AudioSink
) -> None:
    from voxclone.synth.text.ssml import as_document, looks_like_ssml

    if args.subtitles or (args.ssml is False and looks_like_ssml(text)):
        _say_streamed(args, url, {**body, "text": text}, sink)
        return
    job_body = {
        key: value
        for key, value in body.items()
        if value is not None and key not in ("ssml", "timestamps", "stream")
    }
    # A job reads text that starts with <speak> as SSML; --ssml on a fragment
    # says the same by wrapping it.
    job_body["text"] = as_document(text) if args.ssml else text
    job = call_json(url, "POST", "/v1/jobs/speech", body=job_body)
    print(f"voxclone: {len(text)} characters queued as speech job {job['id']}", file=sys.stderr)
    job = wait_job(url, job["id"], "speaking")
    if job["state"] != "succeeded" or not job.get("audio_url"):
        error = job.get("error") or {}
        raise RemoteError(
            f"speech job {job['id']} {job['state']}: {error.get('message') or job['message']}",
            _job_status(error),
            field=error.get("field"),
        )
    with sink.opened() as out:
        size = download(job["audio_url"], out)
    _wrote(sink, size, "from the job's audio link", url)


def _job_status(error: dict[str, Any]) -> int:
    """An exit status for a failed job: a request error (bad voice, text too
    long) is the user's (4xx, exit 2); anything else the server's."""
    code = str(error.get("code", ""))
    user_codes = {"invalid_input", "not_found", "payload_too_large", "bad_request"}
    return 422 if code in user_codes else 500


def _say_streamed(
    args: argparse.Namespace, url: str, body: dict[str, Any], sink: AudioSink
) -> None:
    request = {k: v for k, v in body.items() if v is not None}
    # Word times even without --subtitles: they are the progress.
    request.update(stream=True, timestamps=True)
    total_words = max(1, len(body["text"].split()))
    progress = Progress("speaking")
    audio = bytearray()
    words: list[dict[str, Any]] = []
    try:
        with opened_stream(url, "/v1/tts", method="POST", body=request) as response:
            for _, event in sse_events(response):
                if not isinstance(event, dict) or event.get("type") != "speech.audio.delta":
                    continue
                audio += base64.b64decode(event["audio"])
                words.extend(event.get("timestamps", []))
                progress.show(min(99.9, 100.0 * len(words) / total_words))
        progress.show(100.0)
    finally:
        progress.end()
    data = finish_wav(bytes(audio))
    if args.subtitles:
        _write_subtitle_file(args.subtitles, words)
    sink.write(data)
    _wrote(sink, len(data), "streamed", url)


def finish_wav(data: bytes) -> bytes:
    """A streamed WAV's open-ended sizes (0xFFFFFFFF) set to what arrived, so
    the file is an ordinary WAV; other formats unchanged."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return data
    out = bytearray(data)
    struct.pack_into("<I", out, 4, len(out) - 8)
    offset = 12
    while offset + 8 <= len(out):
        tag = bytes(out[offset : offset + 4])
        size = struct.unpack_from("<I", out, offset + 4)[0]
        if tag == b"data":
            struct.pack_into("<I", out, offset + 4, len(out) - offset - 8)
            break
        offset += 8 + size + (size & 1)
    return bytes(out)


def _subtitled_audio(path: str, answer: dict[str, Any]) -> tuple[bytes, str]:
    """The server's captioned JSON: write the subtitles, return the audio and
    its content type (the answer's own is application/json)."""
    _write_subtitle_file(path, answer["timestamps"])
    return base64.b64decode(answer["audio"]), str(answer["content_type"])


def _write_subtitle_file(path: str, timestamps: list[dict[str, Any]]) -> None:
    from voxclone.synth.text.wordtimes import WordTime

    write_subtitles(path, [WordTime(t["word"], t["start_time"], t["end_time"]) for t in timestamps])


def write_subtitles(path: str, words: Any) -> None:
    from voxclone.synth.text.wordtimes import to_srt, to_vtt

    text = to_vtt(words) if Path(path).suffix.lower() == ".vtt" else to_srt(words)
    Path(path).write_text(text, encoding="utf-8")
    print(f"wrote {path} ({len(words)} words)", file=sys.stderr)


def _wrote(sink: AudioSink, size: int, kind: str, url: str) -> None:
    print(f"wrote {sink.shown} ({size} bytes, {kind}) via {url}", file=sys.stderr)
