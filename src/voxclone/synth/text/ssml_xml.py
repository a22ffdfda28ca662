"""The safe XML half of SSML: is a text a document, and its tree, parsed within limits.

defusedxml with DTDs refused outright: a document type declaration is where
entity-expansion bombs ("billion laughs") and external entities live, and
SSML never needs one, so the parser stops at it before expanding anything
(memory stays flat). The tree builder counts elements and nesting as the
parser meets them and stops at the limit, so a document of millions of empty
tags costs the first few thousand, not a tree of millions (12.9 s of CPU for
4 M before the count). What the tree means is ssml_walk.py's job.
"""

from __future__ import annotations

import re
from typing import Any
from xml.etree.ElementTree import Element, ParseError, TreeBuilder

from voxclone.errors import InvalidSsml, PayloadTooLarge

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# Nesting a person writes is speak > p > s > voice > prosody > emphasis >
# say-as: about 7 levels; 32 leaves room for generated markup and keeps the
# walk's recursion (two frames a level) far from the interpreter's limit.
MAX_DEPTH = 32
# The longest text (max_text_chars, 100,000 by default) marked up sentence by
# sentence (<s>, a <break> and a <prosody> or <say-as> in each of ~1,500
# sentences) is ~6,000 elements; 10,000 is a tag every ten characters. Counted
# while parsing, so a bigger document stops there (~10 ms) with no tree built.
MAX_ELEMENTS = 10_000
_SPEAK_TAG = re.compile(r"<speak[\s>/]")


def looks_like_ssml(text: str) -> bool:
    """True when ``text`` is an SSML document (starts with ``<speak``, maybe after
    ``<?xml``), or an XML document type declaration."""
    head = text.lstrip()[:256]
    if head.startswith("<?xml"):
        end = head.find("?>")
        head = head[end + 2 :].lstrip() if end >= 0 else ""
    if head[:9].upper() == "<!DOCTYPE":
        # A document type before <speak>: SSML never needs one and entity
        # bombs live there, so it goes to the parser, which refuses it. An
        # HTML page (no <speak>) stays plain text, its markup stripped.
        return _SPEAK_TAG.search(text) is not None
    return head.startswith("<speak") and (len(head) == 6 or not head[6].isalnum())


def as_document(text: str) -> str:
    """``text`` as an SSML document: wrapped in ``<speak>`` unless it already is one."""
    return text if looks_like_ssml(text) else f"<speak>{text}</speak>"


class _CountingBuilder(TreeBuilder):
    """A tree builder that refuses the element past MAX_ELEMENTS or MAX_DEPTH as
    the parser meets it (the exception stops expat there)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0
        self.depth = 0

    def start(self, tag: Any, attrs: Any) -> Element:
        self.elements += 1
        self.depth += 1
        if self.elements > MAX_ELEMENTS:
            raise PayloadTooLarge(
                f"SSML has more than {MAX_ELEMENTS} elements",
                field="text",
                limit=MAX_ELEMENTS,
            )
        if self.depth > MAX_DEPTH:
            raise InvalidSsml(
                f"SSML is nested deeper than {MAX_DEPTH} elements", field="text", limit=MAX_DEPTH
            )
        return super().start(tag, attrs)

    def end(self, tag: Any) -> Element:
        self.depth -= 1
        return super().end(tag)


def parse_xml(text: str) -> Element:
    """The tree of ``text``; InvalidSsml naming line and column when malformed or
    holding a DTD, PayloadTooLarge past MAX_ELEMENTS."""
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import DefusedXMLParser

    parser = DefusedXMLParser(
        target=_CountingBuilder(), forbid_dtd=True, forbid_entities=True, forbid_external=True
    )
    try:
        parser.feed(text)
        root: Element = parser.close()
        return root
    except ParseError as exc:
        line, column = getattr(exc, "position", (0, 0))
        # expat's message ends with its own "line 1, column 5"; say it once, 1-based.
        reason = str(exc).split(":")[0]
        raise InvalidSsml(
            f"SSML is not well-formed: {reason} at line {line}, column {column + 1}",
            field="text",
            limit={"line": line, "column": column + 1},
        ) from None
    except DefusedXmlException:
        raise InvalidSsml(
            "SSML must not contain a DTD, entity declarations or external references",
            field="text",
        ) from None


def local_name(tag: Any) -> str:
    """Tag name without its namespace (``{http://www.w3.org/2001/10/synthesis}speak``)."""
    if not isinstance(tag, str):  # comments and processing instructions
        return ""
    return tag.rsplit("}", 1)[-1].lower()
