"""``voxclone audiobook BOOK.epub --voice V -o book.m4b``: a book through a server.

The book (EPUB, Markdown or plain text) goes to a running server's ``POST
/v1/audiobooks`` (--server, else the configured local one); each chapter is a
durable job there, so the book is rendered by the server, not this process:
the command follows the chapters' progress (``/events``, one line per chapter
as it ends) and then writes the M4B with its chapter marks (``--manifest``:
the chapters' titles, start times and durations as JSON; ``--words``: the
book's words on its clock as JSON, SRT or WebVTT, api/cli_book_words.py).
Ctrl-C leaves the book rendering; the same command again (an Idempotency-Key
made from the file and options) or ``voxclone audiobook --book-id ID -o
book.m4b`` follows it.
A server that cannot be reached is one line on stderr: there is no
in-process render, since a book of hours needs the server's durable jobs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from voxclone.api.cli_book_words import book_words_text, fetch_book_words, words_format
from voxclone.api.cli_dialogue import read_cast
from voxclone.config import Settings
from voxclone.errors import InvalidInput

POLL_INTERVAL_S = 1.0


def add_audiobook_parser(sub: Any) -> None:
    p = sub.add_parser("audiobook", help="render a book (EPUB, Markdown, text) to an M4B")
    p.add_argument("book", nargs="?", help="the book file (.epub, .md, .txt)")
    p.add_argument("--voice", help="the narrator's voice (needed with a book file)")
    p.add_argument("--cast", help='JSON file {"Name": "voice"}: character voices')
    p.add_argument(
        "--quotes",
        action="store_true",
        help="quoted speech to the cast character named in its paragraph",
    )
    p.add_argument("--speed", type=float, help="0.5-2.0")
    p.add_argument("-o", "--output", required=True, help="the audiobook (.m4b or .m4a)")
    p.add_argument("--manifest", metavar="FILE", help="also write the chapters' manifest (JSON)")
    p.add_argument(
        "--words",
        metavar="FILE",
        help="also write the book's words on the M4B's clock, with speakers: .json (per "
        "chapter), .srt or .vtt (one subtitle track for the whole book)",
    )
    p.add_argument("--book-id", dest="book_id", help="wait for and fetch a book already sent")
    p.add_argument(
        "--new",
        action="store_true",
        help="render the book again even if this command sent it before (by default the same "
        "file and options follow the book already on the server)",
    )
    p.add_argument(
        "--server",
        metavar="URL",
        help="the voxclone server (default: the configured local one, http://127.0.0.1:8000; "
        "API key from VOXCLONE_API_KEY)",
    )


def cmd_audiobook(args: argparse.Namespace, settings: Settings) -> int:
    from voxclone.api.cli_remote import call_json, default_server_url

    url = args.server or default_server_url(settings)
    words_fmt = words_format(args.words) if args.words else None  # a typo costs no render
    if args.book_id:
        book_id = args.book_id
    else:
        if not args.book or not args.voice:
            raise InvalidInput("give a book file and --voice (or --book-id of one sent before)")
        path = Path(args.book)
        fmt = "m4a" if args.output.lower().endswith(".m4a") else "m4b"
        form = [("voice", args.voice), ("format", fmt)]
        if args.cast:
            cast = {name: role["voice"] for name, role in read_cast(args.cast).items()}
            form.append(("cast", json.dumps(cast)))
        if args.quotes:
            form.append(("quotes", "true"))
        if args.speed is not None:
            form.append(("speed", str(args.speed)))
        data = path.read_bytes()
        # The same book and options are the same book on the server (its
        # Idempotency-Key): running the command again after Ctrl-C or a lost
        # connection follows the book already rendering instead of a second one.
        digest = hashlib.sha256(data + json.dumps(form).encode()).hexdigest()[:32]
        key = None if args.new else f"audiobook-{digest}"
        book = _send(url, form, (path.name, data), key)
        book_id = book["id"]
        print(f"book {book_id}: {len(book['chapters'])} chapters queued on {url}", file=sys.stderr)
    try:
        book = _follow(url, book_id)
    except KeyboardInterrupt:
        print(
            f"voxclone: the book keeps rendering on the server; the same command again, "
            f"or 'voxclone audiobook --book-id {book_id} -o {args.output}', fetches it",
            file=sys.stderr,
        )
        raise
    if book["state"] != "succeeded":
        for ch in book["chapters"]:
            if ch["state"] != "succeeded":
                print(f"chapter {ch['n']} ({ch['title']}): {ch['message']}", file=sys.stderr)
        print(
            f"voxclone: the book has chapters that did not render; re-render one with "
            f"POST /v1/audiobooks/{book_id}/chapters/N/render",
            file=sys.stderr,
        )
        return 1
    size = _download(url, f"/v1/audiobooks/{book_id}/audio", args.output)
    if args.manifest:
        manifest = call_json(url, "GET", f"/v1/audiobooks/{book_id}/manifest")
        Path(args.manifest).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    if words_fmt is not None:
        chapters = fetch_book_words(url, book_id, len(book["chapters"]))
        Path(args.words).write_text(book_words_text(chapters, words_fmt), encoding="utf-8")
    print(
        f"wrote {args.output}: {len(book['chapters'])} chapters, {size} bytes (book {book_id})",
        file=sys.stderr,
    )
    return 0


def _send(
    url: str, form: list[tuple[str, str]], file: tuple[str, bytes], key: str | None
) -> dict[str, Any]:
    """POST the book (multipart) with its Idempotency-Key; the book's JSON."""
    from voxclone.api.cli_remote import _opened, _request, multipart, retrying

    body, content_type = multipart(form, [("file", *file)])

    def once() -> dict[str, Any]:
        request = _request(url, "/v1/audiobooks", "POST", body, content_type, None)
        if key is not None:
            request.add_header("Idempotency-Key", key)
        with _opened(request, url) as response:
            answer: dict[str, Any] = json.load(response)
            return answer

    return retrying(once)


def _follow(url: str, book_id: str) -> dict[str, Any]:
    """The book once it ended, a line on stderr per chapter as it ends."""
    from voxclone.api.cli_jobs import sse_events
    from voxclone.api.cli_remote import RemoteError, call_json, opened_stream

    told: set[int] = set()

    def tell(ch: dict[str, Any]) -> None:
        if ch["state"] in ("succeeded", "failed", "cancelled", "missing") and ch["n"] not in told:
            told.add(ch["n"])
            print(f"chapter {ch['n']} {ch['state']}: {ch['title']}", file=sys.stderr)

    try:
        with opened_stream(url, f"/v1/audiobooks/{book_id}/events") as response:
            for event, data in sse_events(response):
                if event == "chapter":
                    tell(data)
                elif event == "done":
                    for ch in data["chapters"]:
                        tell(ch)
                    return dict(data)
    except RemoteError as exc:
        if exc.status in (401, 403, 404):
            raise
    except OSError:
        pass  # the stream broke: poll instead
    while True:
        book = call_json(url, "GET", f"/v1/audiobooks/{book_id}", patience_s=None)
        for ch in book["chapters"]:
            tell(ch)
        if book["state"] in ("succeeded", "failed"):
            return book
        time.sleep(POLL_INTERVAL_S)


def _download(url: str, path: str, output: str) -> int:
    from voxclone.api.cli_remote import opened_stream

    total = 0
    with opened_stream(url, path) as response, open(output, "wb") as out:
        while chunk := response.read(1 << 16):
            out.write(chunk)
            total += len(chunk)
    return total
