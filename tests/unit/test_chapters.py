"""Chapters of EPUB (built here, stdlib zip), Markdown and plain text; hostile EPUBs."""

from __future__ import annotations

import io
import zipfile

import pytest

from voxclone.errors import InvalidInput, PayloadTooLarge
from voxclone.synth.text import chapters as ch
from voxclone.synth.text.chapters import parse_book, sniff_kind

CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf"
    media-type="application/oebps-package+xml"/></rootfiles>
</container>"""


def _opf(items: list[tuple[str, str]]) -> str:
    manifest = "".join(
        f'<item id="{i}" href="{href}" media-type="application/xhtml+xml"/>' for i, href in items
    )
    # A document named notes*.xhtml is out of the reading order (linear="no").
    linear = {True: ' linear="no"', False: ""}
    spine = "".join(f'<itemref idref="{i}"{linear["notes" in href]}/>' for i, href in items)
    return f"""<?xml version="1.0"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>A Small Book</dc:title>
  </metadata>
  <manifest>{manifest}<item id="css" href="style.css" media-type="text/css"/></manifest>
  <spine>{spine}</spine>
</package>"""


def _xhtml(body: str, title: str = "t") -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
        f"<head><title>{title}</title><style>p {{color: red}}</style></head>"
        f"<body>{body}</body></html>"
    )


def make_epub(docs: list[tuple[str, str]]) -> bytes:
    """An EPUB whose spine is ``docs`` (name, XHTML) in order."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", CONTAINER)
        items = [(f"d{n}", f"text/{name}") for n, (name, _) in enumerate(docs)]
        z.writestr("OEBPS/content.opf", _opf(items))
        for name, html in docs:
            z.writestr(f"OEBPS/text/{name}", html, compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("OEBPS/style.css", "p {}")
    return buf.getvalue()


def test_epub_chapters_in_spine_order_with_heading_titles() -> None:
    data = make_epub(
        [
            ("cover.xhtml", _xhtml('<img src="c.jpg"/>')),
            ("one.xhtml", _xhtml("<h1>The Start</h1><p>It began.</p><p>Then &amp; more.</p>")),
            ("two.xhtml", _xhtml("<p>No heading here.</p>", title="Second")),
            ("notes.xhtml", _xhtml("<h1>Notes</h1><p>1. A footnote.</p>")),
            ("nav.xhtml", _xhtml("<nav><ol><li>The Start</li><li>Second</li></ol></nav>")),
        ]
    )
    assert sniff_kind(data, "book.epub") == "epub"
    book = parse_book(data, "epub", max_chars=10_000)
    assert book.title == "A Small Book"
    assert [c.title for c in book.chapters] == ["The Start", "Second"]  # cover skipped
    assert book.chapters[0].paragraphs == ["It began.", "Then & more."]
    assert "color" not in book.chapters[0].text  # styles are not read


def test_markdown_book_title_over_chapter_headings() -> None:
    text = (
        "# My Book\n\nA foreword line.\n\n## One\n\nHello **there**, [link](http://x).\n\n"
        "```\ncode()\n```\n\n## Two\n\n- a list item\n"
    )
    book = parse_book(text.encode(), sniff_kind(text.encode(), "b.md"), max_chars=10_000)
    assert book.title == "My Book"
    assert [c.title for c in book.chapters] == ["Opening", "One", "Two"]
    assert book.chapters[1].text == "Hello there, link."
    assert book.chapters[2].text == "a list item"


def test_plain_text_chapter_headings() -> None:
    text = "CHAPTER I\nThe sea.\n\nIt was calm.\n\nChapter 2: Storm\nWind rose.\n"
    book = parse_book(text.encode(), "text", max_chars=10_000)
    assert [c.title for c in book.chapters] == ["CHAPTER I", "Chapter 2: Storm"]
    assert book.chapters[0].paragraphs == ["The sea.", "It was calm."]
    # A sentence that merely starts with the word is no heading.
    assert len(parse_book(b"Chapter one was long, and it went on.", "text", max_chars=99).chapters)


def test_text_without_headings_is_one_chapter() -> None:
    book = parse_book(b"Just a story.\n\nThe end.", "text", max_chars=100)
    assert [(c.title, c.paragraphs) for c in book.chapters] == [
        ("Chapter 1", ["Just a story.", "The end."])
    ]


def test_not_a_zip_is_a_4xx_naming_file() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_book(b"PK\x03\x04 not really a zip", "epub", max_chars=100)
    assert info.value.field == "file" and info.value.status == 422


def test_zip_bomb_stops_at_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # A member that inflates ~1000x: refused once the read passes the budget,
    # not after unpacking it (the budget lowered so the test stays small).
    monkeypatch.setattr(ch, "MAX_UNPACKED_BYTES", 1 << 20)
    bomb = _xhtml("<p>" + "a" * (4 << 20) + "</p>")
    data = make_epub([("one.xhtml", bomb)])
    assert len(data) < 64 << 10
    with pytest.raises(PayloadTooLarge) as info:
        parse_book(data, "epub", max_chars=10 << 20)
    assert info.value.field == "file" and info.value.limit == 1 << 20


def test_no_chapters_and_too_many_characters() -> None:
    with pytest.raises(InvalidInput) as info:
        parse_book(make_epub([("c.xhtml", _xhtml("<img src='x'/>"))]), "epub", max_chars=100)
    assert info.value.field == "file"
    with pytest.raises(PayloadTooLarge) as big:
        parse_book(b"Chapter 1\n" + b"word " * 100, "text", max_chars=100)
    assert big.value.limit == 100 and big.value.field == "file"


def test_bad_xml_in_the_package_is_a_4xx() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("META-INF/container.xml", "<container><oops")
    with pytest.raises(InvalidInput):
        parse_book(buf.getvalue(), "epub", max_chars=100)
