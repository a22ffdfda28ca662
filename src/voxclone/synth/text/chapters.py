"""A book's chapters from EPUB, Markdown or plain text (audiobooks).

EPUB is read with the standard library (``zipfile``, ``html.parser``) and
``defusedxml`` for its container and package files, not with EbookLib: EbookLib
0.20 is AGPL-3.0-or-later (its PyPI metadata), which this Apache-2.0 service
cannot ship in its serving install. An EPUB needs little: ``META-INF/container.xml``
names the package (OPF), whose spine lists the chapter documents in reading order.

A chapter is a spine document with text; its title is its first ``<h1>``-``<h3>``
(else its ``<title>``, else "Chapter N"). Markdown splits at ``#`` and ``##``
headings (a lone ``#`` over several ``##`` is the book's title); plain text
splits at lines that start with "Chapter"/"CHAPTER", "Prologue" or "Epilogue".
A text without headings is one chapter. Paragraphs are kept (a blank line
between them): the renderer pauses at each.

Hostile files: an EPUB that is not a zip, has too many members, or whose
members would unpack to more than :data:`MAX_UNPACKED_BYTES` (a zip bomb: sizes
are counted as bytes are read, never trusted from the header) is a 4xx naming
``file`` and the limit.
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Literal
from xml.etree.ElementTree import Element

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from voxclone.errors import InvalidInput, PayloadTooLarge

BookKind = Literal["epub", "markdown", "text"]
BOOK_KINDS: tuple[str, ...] = ("epub", "markdown", "text")

# Members of one EPUB: a long novel has a few hundred (chapters, images, fonts).
MAX_MEMBERS = 5_000
# Bytes all read members may unpack to: a 2,000,000-character book is ~6 MB
# of XHTML; images are never read. Past it the file is refused as a bomb.
MAX_UNPACKED_BYTES = 64 << 20
# Chapters of one book (each becomes a job; a long novel has ~100).
MAX_CHAPTERS = 500
# Headings longer than this are text, not a title (plain text).
_MAX_HEADING_CHARS = 80


@dataclass(frozen=True)
class Chapter:
    title: str
    text: str  # paragraphs separated by a blank line; the title not repeated

    @property
    def paragraphs(self) -> list[str]:
        return [p for p in (s.strip() for s in self.text.split("\n\n")) if p]


@dataclass(frozen=True)
class Book:
    title: str | None
    chapters: tuple[Chapter, ...]

    @property
    def chars(self) -> int:
        return sum(len(c.title) + len(c.text) for c in self.chapters)


def sniff_kind(data: bytes, filename: str | None = None) -> BookKind:
    """EPUB by its zip signature, Markdown by extension or a ``#`` heading, else text."""
    if data[:4] == b"PK\x03\x04" or (filename or "").lower().endswith(".epub"):
        return "epub"
    name = (filename or "").lower()
    if name.endswith((".md", ".markdown")):
        return "markdown"
    if name.endswith(".txt"):
        return "text"
    head = data[:200_000].decode("utf-8", "replace")
    if re.search(r"(?m)^#{1,2}\s+\S", head):
        return "markdown"
    return "text"


def parse_book(data: bytes, kind: BookKind, *, max_chars: int) -> Book:
    """The chapters of ``data``; 4xx (field ``file``) when it has none, too
    many, or more than ``max_chars`` characters."""
    if kind == "epub":
        book = parse_epub(data)
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidInput("the book is not UTF-8 text", field="file") from None
        book = parse_markdown(text) if kind == "markdown" else parse_plain(text)
    return checked(book, max_chars=max_chars)


def checked(book: Book, *, max_chars: int) -> Book:
    chapters = tuple(c for c in book.chapters if c.text.strip() or c.title.strip())
    if not chapters:
        raise InvalidInput("the book has no chapters with text", field="file", limit=1, value=0)
    if len(chapters) > MAX_CHAPTERS:
        raise PayloadTooLarge(
            f"the book has {len(chapters)} chapters, more than {MAX_CHAPTERS}",
            field="file",
            limit=MAX_CHAPTERS,
            value=len(chapters),
        )
    out = Book(book.title, chapters)
    if out.chars > max_chars:
        raise PayloadTooLarge(
            f"the book has {out.chars} characters, more than {max_chars} (max_book_chars)",
            field="file",
            limit=max_chars,
            value=out.chars,
        )
    return out


# -- plain text ---------------------------------------------------------------------
_PLAIN_HEADING = re.compile(r"^\s*(?:chapter\b|prologue\b|epilogue\b)", re.IGNORECASE)


def parse_plain(text: str) -> Book:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    chapters: list[Chapter] = []
    title: str | None = None
    body: list[str] = []
    front: list[str] | None = None  # text before the first heading

    def close() -> None:
        if title is not None:
            chapters.append(Chapter(title, _paragraphs("\n".join(body))))

    for i, line in enumerate(lines):
        starts_block = i == 0 or not lines[i - 1].strip()
        if starts_block and _PLAIN_HEADING.match(line) and len(line.strip()) <= _MAX_HEADING_CHARS:
            if title is None:
                front = body
            close()
            title, body = line.strip(), []
        else:
            body.append(line)
    close()
    if title is None:  # no headings: the whole text is one chapter
        return Book(None, (Chapter("Chapter 1", _paragraphs("\n".join(body))),))
    lead = _paragraphs("\n".join(front or []))
    if lead:
        chapters.insert(0, Chapter("Opening", lead))
    return Book(None, tuple(chapters))


def _paragraphs(text: str) -> str:
    """Blank-line-separated paragraphs, each on one line."""
    blocks = re.split(r"\n\s*\n", text.strip())
    paras = [" ".join(b.split()) for b in blocks]
    return "\n\n".join(p for p in paras if p)


# -- Markdown -----------------------------------------------------------------------
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def parse_markdown(text: str) -> Book:
    lines = text.replace("\r\n", "\n").split("\n")
    headings: list[tuple[int, int, str]] = []  # (line, level, title)
    fenced = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        m = None if fenced else _MD_HEADING.match(line)
        if m and len(m.group(1)) <= 2:
            headings.append((i, len(m.group(1)), _md_inline(m.group(2))))
    book_title = None
    tops = [h for h in headings if h[1] == 1]
    seconds = [h for h in headings if h[1] == 2]
    if len(tops) == 1 and seconds and tops[0][0] < seconds[0][0]:
        # "# Book" over "## Chapter" headings: the one top heading names the book.
        book_title = tops[0][2]
        headings = [h for h in headings if h[1] == 2 or h is not tops[0]]
        cut = tops[0][0] + 1
    else:
        cut = 0
    if not headings:
        return Book(book_title, (Chapter("Chapter 1", _md_body(lines[cut:])),))
    chapters: list[Chapter] = []
    lead = _md_body(lines[cut : headings[0][0]])
    if lead:
        chapters.append(Chapter("Opening", lead))
    for n, (at, _level, title) in enumerate(headings):
        end = headings[n + 1][0] if n + 1 < len(headings) else len(lines)
        chapters.append(Chapter(title, _md_body(lines[at + 1 : end])))
    return Book(book_title, tuple(chapters))


def _md_body(lines: list[str]) -> str:
    kept: list[str] = []
    fenced = False
    for line in lines:
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            kept.append("")
            continue
        if fenced:
            continue  # code is not read aloud
        line = re.sub(r"^\s*(?:>\s*)+", "", line)  # block quotes
        line = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line)  # list markers
        if re.fullmatch(r"\s*(?:[-*_]\s*){3,}", line) or _MD_HEADING.match(line):
            kept.append("")  # rules and deeper headings end a paragraph
            if _MD_HEADING.match(line):
                kept.extend([_md_inline(_MD_HEADING.match(line).group(2)), ""])  # type: ignore[union-attr]
            continue
        kept.append(_md_inline(line))
    return _paragraphs("\n".join(kept))


def _md_inline(s: str) -> str:
    s = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", s)  # images
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)  # links: their text
    s = re.sub(r"`([^`]*)`", r"\1", s)
    s = re.sub(r"(\*\*|__|\*|_)(\S(?:.*?\S)?)\1", r"\2", s)  # emphasis
    return s.strip()


# -- EPUB ---------------------------------------------------------------------------
_OPF_NS = "{http://www.idpf.org/2007/opf}"
_DC_NS = "{http://purl.org/dc/elements/1.1/}"
_CONTAINER_NS = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_XHTML_TYPES = ("application/xhtml+xml", "text/html")


class _Members:
    """A zip's members read with a budget of unpacked bytes for all of them."""

    def __init__(self, data: bytes) -> None:
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, OSError, ValueError):
            raise InvalidInput("the EPUB is not a zip file", field="file") from None
        infos = self._zip.infolist()
        if len(infos) > MAX_MEMBERS:
            raise PayloadTooLarge(
                f"the EPUB has {len(infos)} files, more than {MAX_MEMBERS}",
                field="file",
                limit=MAX_MEMBERS,
                value=len(infos),
            )
        self._names = {i.filename for i in infos}
        self._left = MAX_UNPACKED_BYTES

    def read(self, name: str) -> bytes:
        if name not in self._names:
            raise InvalidInput(f"the EPUB lacks {name}", field="file")
        try:
            with self._zip.open(name) as f:
                # One byte over the budget is enough to know: never more.
                data = f.read(self._left + 1)
        except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError):
            raise InvalidInput(f"the EPUB's {name} cannot be read", field="file") from None
        if len(data) > self._left:
            raise PayloadTooLarge(
                f"the EPUB unpacks to more than {MAX_UNPACKED_BYTES >> 20} MB of text "
                "(a zip bomb?)",
                field="file",
                limit=MAX_UNPACKED_BYTES,
            )
        self._left -= len(data)
        return data


def _xml(data: bytes, what: str) -> Element:
    try:
        root: Element = SafeET.fromstring(data)
    except (SafeET.ParseError, DefusedXmlException, ValueError):
        raise InvalidInput(f"the EPUB's {what} is not valid XML", field="file") from None
    return root


def parse_epub(data: bytes) -> Book:
    members = _Members(data)
    container = _xml(members.read("META-INF/container.xml"), "META-INF/container.xml")
    rootfile = container.find(f".//{_CONTAINER_NS}rootfile")
    opf_path = rootfile.get("full-path") if rootfile is not None else None
    if not opf_path:
        raise InvalidInput("the EPUB's container.xml names no package", field="file")
    opf = _xml(members.read(opf_path), opf_path)
    base = posixpath.dirname(opf_path)
    title_el = opf.find(f".//{_DC_NS}title")
    book_title = (title_el.text or "").strip() or None if title_el is not None else None
    manifest = {
        item.get("id"): (item.get("href") or "", item.get("media-type") or "")
        for item in opf.iter(f"{_OPF_NS}item")
    }
    chapters: list[Chapter] = []
    for ref in opf.iter(f"{_OPF_NS}itemref"):
        if ref.get("linear") == "no":
            continue  # out of the reading order (notes, answers): not read in sequence
        href, media = manifest.get(ref.get("idref"), ("", ""))
        if not href or media not in _XHTML_TYPES:
            continue
        path = posixpath.normpath(posixpath.join(base, href.split("#", 1)[0]))
        doc = _Xhtml()
        doc.feed(members.read(path).decode("utf-8", "replace"))
        doc.close()
        text = _paragraphs("\n\n".join(doc.blocks))
        title = doc.heading or doc.title
        if not text:
            continue  # a cover or an image page: nothing to read
        chapters.append(Chapter(title or f"Chapter {len(chapters) + 1}", text))
    return Book(book_title, tuple(chapters))


class _Xhtml(HTMLParser):
    """Text of an XHTML chapter, a block per paragraph; its first heading apart."""

    _BLOCKS = frozenset(
        {"p", "div", "br", "li", "blockquote", "section", "tr", "h4", "h5", "h6", "hr"}
    )
    _SKIP = frozenset({"script", "style", "head", "nav", "svg", "math"})
    _HEADINGS = frozenset({"h1", "h2", "h3"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self.heading: str | None = None
        self.title: str | None = None
        self._current: list[str] = []
        self._skip = 0
        self._in_heading = False
        self._in_title = False
        self._heading_text: list[str] = []

    def _flush(self) -> None:
        text = " ".join("".join(self._current).split())
        if text:
            self.blocks.append(text)
        self._current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._HEADINGS:
            self._flush()
            self._in_heading = True
            self._heading_text = []
        elif tag in self._BLOCKS:
            self._flush()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._BLOCKS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in self._HEADINGS and self._in_heading:
            self._in_heading = False
            text = " ".join("".join(self._heading_text).split())
            if text and self.heading is None:
                self.heading = text  # the title: not read twice
            elif text:
                self.blocks.append(text)
        elif tag in self._BLOCKS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title = ((self.title or "") + data).strip() or None
            return
        if self._skip:
            return
        if self._in_heading:
            self._heading_text.append(data)
        else:
            self._current.append(data)

    def close(self) -> None:
        super().close()
        self._flush()
