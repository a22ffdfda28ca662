"""A subset of SSML 1.1 turned into plain speech segments (pure: no I/O, no web types).

``parse_ssml`` is the way in: the text parsed safely and within limits
(ssml_xml.py: defusedxml, DTDs refused, elements and nesting counted while
parsing), the tree walked into items in speaking order (ssml_walk.py, with
attribute values and say-as readings from ssml_values.py), and the result, an
``SsmlDocument`` (ssml_document.py), held to its silence budget before any
synthesis. ``ssml_language`` maps an xml:lang onto a supported language.

The names the rest of the service imports from here are re-exported, so
``from voxclone.synth.text.ssml import ...`` keeps working for all of them.
"""

from __future__ import annotations

from voxclone.errors import InvalidSsml
from voxclone.synth.text.ssml_document import (
    MAX_BREAK_S,
    SILENCE_FLOOR_S,
    SPOKEN_CHARS_PER_S,
    Prosody,
    SsmlBreak,
    SsmlDocument,
    SsmlItem,
    SsmlText,
    check_output_s,
    check_silence,
    silence_budget_s,
    ssml_silence_s,
    ssml_spoken_chars,
)
from voxclone.synth.text.ssml_values import (
    BREAK_STRENGTHS,
    PITCH_OCTAVES,
    RATE_RANGE,
    VOLUME_DB,
    VOLUME_FACTOR,
)
from voxclone.synth.text.ssml_walk import WalkContext, Walker
from voxclone.synth.text.ssml_xml import (
    MAX_DEPTH,
    MAX_ELEMENTS,
    XML_LANG,
    as_document,
    local_name,
    looks_like_ssml,
)

# Looked up here at call time, so a test can watch (monkeypatch) the parse.
from voxclone.synth.text.ssml_xml import parse_xml as _parse_xml

__all__ = [
    "BREAK_STRENGTHS",
    "MAX_BREAK_S",
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "PITCH_OCTAVES",
    "RATE_RANGE",
    "SILENCE_FLOOR_S",
    "SPOKEN_CHARS_PER_S",
    "VOLUME_DB",
    "VOLUME_FACTOR",
    "XML_LANG",
    "Prosody",
    "SsmlBreak",
    "SsmlDocument",
    "SsmlItem",
    "SsmlText",
    "as_document",
    "check_output_s",
    "check_silence",
    "looks_like_ssml",
    "parse_ssml",
    "silence_budget_s",
    "ssml_language",
    "ssml_silence_s",
    "ssml_spoken_chars",
]


def parse_ssml(text: str) -> SsmlDocument:
    """Parse ``text`` (an SSML document); InvalidInput naming line and column when
    malformed, PayloadTooLarge past MAX_ELEMENTS or the silence budget."""
    root = _parse_xml(text)
    if local_name(root.tag) != "speak":
        raise InvalidSsml(
            f"SSML must have <speak> as its root element, not <{local_name(root.tag)[:32]}>",
            field="text",
        )
    walker = Walker()
    language = root.get(XML_LANG)
    walker.walk(root, WalkContext(language=language), depth=0)
    walker.flush()
    doc = SsmlDocument(tuple(walker.items), language, tuple(walker.warnings))
    check_silence(doc)
    return doc


def ssml_language(code: str, supported: tuple[str, ...]) -> str:
    """An xml:lang value ("en-US", "fr-FR", "pt-BR") as one of ``supported`` codes."""
    wanted = code.strip().lower().replace("_", "-")
    if wanted in supported:
        return wanted
    if wanted == "en" and "en-us" in supported:
        return "en-us"
    base = wanted.split("-")[0]
    if base in supported:
        return base
    matches = [s for s in supported if s.split("-")[0] == base]
    if matches:
        return matches[0]
    from voxclone.errors import UnsupportedLanguage

    raise UnsupportedLanguage(
        f"xml:lang '{code[:16]}' is not supported; supported: {', '.join(sorted(supported))}",
        field="language",
        limit=sorted(supported),
    )
