"""Text segmentation: clean raw input, split it into sentences, and cut sentences to fit.

The pipeline is ``clean_text`` → ``split_paragraphs`` / ``split_sentences`` →
(language normalization, G2P) → ``split_for_budget`` when a sentence's phoneme
tokens exceed the engine's context, with ``first_chunk_for_streaming`` making
the first piece short so the first audio comes out quickly, and
``sentence_pause_s`` deciding the silence that follows each piece.

Everything here is language-agnostic (Latin, CJK, RTL scripts alike), runs in
time linear in the input, and ``clean_text`` / ``split_sentences`` never raise.
"""

from __future__ import annotations

import html
import logging
import re
import unicodedata
from collections.abc import Callable

from voxclone.errors import InvalidInput
from voxclone.synth.text.normalize_titles import is_title_abbreviation

__all__ = [
    "clean_text",
    "first_chunk_for_streaming",
    "sentence_pause_s",
    "split_for_budget",
    "split_paragraphs",
    "split_sentences",
]

_log = logging.getLogger(__name__)

# =============================================================================
# clean_text
# =============================================================================

# Elements whose content is code or styling, never prose.
_RAW_TEXT_OPEN = re.compile(r"<(script|style)\b", re.IGNORECASE)
_RAW_TEXT_CLOSE = {
    "script": re.compile(r"</script\s*>", re.IGNORECASE),
    "style": re.compile(r"</style\s*>", re.IGNORECASE),
}
_COMMENT_OPEN, _COMMENT_CLOSE = "<!--", "-->"
# Possessive class: a tag never rescans its attributes when it fails to close.
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*+)[^<>]*+>|<[!?][^<>]*+>")
# Tags that end a block of text: their removal should leave a sentence break.
_BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt",
        "figcaption", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
        "main", "nav", "ol", "p", "pre", "section", "table", "td", "th", "tr", "ul",
    }
)  # fmt: skip

_QUOTE_AND_DASH_MAP = str.maketrans(
    {
        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u00ab": '"',
        "\u00bb": '"', "\u301d": '"', "\u301e": '"', "\u2033": '"',
        "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2039": "'",
        "\u203a": "'", "\u2032": "'", "\u0060": "'", "\u00b4": "'",
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2212": "-",
        "\u2014": "\u2014", "\u2015": "\u2014", "\u2e3a": "\u2014", "\u2026": "...",
        "\u2028": "\n", "\u2029": "\n\n", "\u0085": "\n", "\t": " ",
        "\u200b": " ", "\u3000": " ",
    }
)  # fmt: skip
# Applied after whitespace is collapsed, so " ?" is enough and nothing rescans long runs.
_DOUBLE_HYPHEN = re.compile(r" ?--+ ?")
_SPACED_DOTS = re.compile(r"\.(?: \.){2,}")
_LONG_DOTS = re.compile(r"\.{4,}")

# Punctuation that carries no sound and no prosody for a TTS voice.
_SILENT_PUNCTUATION = frozenset("*\\•·†‡※¶§‣⁂⁃◦∙|~^_")
# Symbols the English normalizer reads aloud ("$5" → "five dollars"); other
# symbols (emoji, arrows, box drawing, …) are dropped.
_SPEAKABLE_SYMBOLS = frozenset("$€£¥₹+=×°%&@#/<>")
# Joiners shape Persian/Indic script; keep them only between two letters.
_JOINERS = "\u200c\u200d"
_STRAY_JOINER = re.compile(rf"(?<!\w)[{_JOINERS}]+|[{_JOINERS}]+(?!\w)")
_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")
_SPACE_BEFORE_PUNCTUATION = re.compile(r" (?=[.,;:!?])")
_SPACE_AROUND_NEWLINE = re.compile(r" ?\n ?")
_MANY_NEWLINES = re.compile(r"\n{3,}")


class _SpeakableCharacters(dict[int, str | None]):
    """``str.translate`` table computed lazily per code point and then cached."""

    def __missing__(self, code_point: int) -> str | None:
        self[code_point] = replacement = _speakable(chr(code_point))
        return replacement


def _speakable(ch: str) -> str | None:
    """What to keep of one character: itself, a space, or nothing (None)."""
    if ch == "\n":
        return ch
    category = unicodedata.category(ch)
    major = category[0]
    if major in "LN":
        return ch
    if major == "M":
        # Variation selectors and enclosing keycaps only decorate emoji.
        if category == "Me" or "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef":
            return None
        return ch
    if major == "Z":
        return " "
    if major == "P":
        return " " if ch in _SILENT_PUNCTUATION else ch
    if major == "S":
        return ch if ch in _SPEAKABLE_SYMBOLS else " "
    if category == "Cf" and ch in _JOINERS:
        return ch
    # Cc (other controls act as separators), Cf, Co, Cn, Cs.
    return " " if category == "Cc" else None


_SPEAKABLE_TABLE = _SpeakableCharacters()


def _drop_raw_text_elements(text: str) -> str:
    """Remove <script>/<style> elements with their content; an unclosed one runs to the end."""
    pieces: list[str] = []
    position = 0
    while (opening := _RAW_TEXT_OPEN.search(text, position)) is not None:
        pieces += (text[position : opening.start()], " ")
        closing = _RAW_TEXT_CLOSE[opening.group(1).lower()].search(text, opening.end())
        position = closing.end() if closing else len(text)
    pieces.append(text[position:])
    return "".join(pieces)


def _drop_comments(text: str) -> str:
    """Remove <!-- comments -->; an unclosed one runs to the end, as in a browser."""
    pieces: list[str] = []
    position = 0
    while (start := text.find(_COMMENT_OPEN, position)) >= 0:
        pieces += (text[position:start], " ")
        end = text.find(_COMMENT_CLOSE, start + len(_COMMENT_OPEN))
        position = end + len(_COMMENT_CLOSE) if end >= 0 else len(text)
    pieces.append(text[position:])
    return "".join(pieces)


def _strip_markup(text: str) -> str:
    """Remove HTML/XML: script and style bodies, comments, then the tags themselves."""
    if "<" not in text:
        return text
    text = _drop_comments(_drop_raw_text_elements(text))
    return _TAG.sub(_tag_replacement, text)


def _tag_replacement(match: re.Match[str]) -> str:
    name = (match.group(2) or "").lower()
    return "\n" if name in _BLOCK_TAGS else " "


def _clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFKC", text)
    text = _strip_markup(text)
    if "&" in text:
        # Entities are decoded after the first strip; markup they spell out
        # ("&lt;script&gt;") is stripped as well, since reading code aloud helps nobody.
        text = _strip_markup(html.unescape(text))
    text = text.translate(_QUOTE_AND_DASH_MAP)
    text = text.translate(_SPEAKABLE_TABLE)
    text = _STRAY_JOINER.sub("", text)
    text = _HORIZONTAL_SPACE.sub(" ", text)
    text = _DOUBLE_HYPHEN.sub(" \u2014 ", text)
    text = _SPACED_DOTS.sub("...", text)
    text = _LONG_DOTS.sub("...", text)
    text = _SPACE_BEFORE_PUNCTUATION.sub("", text)
    text = _SPACE_AROUND_NEWLINE.sub("\n", text)
    return _MANY_NEWLINES.sub("\n\n", text).strip()


def clean_text(text: str) -> str:
    """Make arbitrary user text safe and speakable; never raises.

    NFKC; HTML/XML tags removed (script/style bodies and comments dropped, block
    tags become line breaks); curly quotes → straight, dashes → "-" or "—",
    ellipsis → "..."; control characters, emoji and unspeakable symbols removed;
    tabs become spaces and newlines survive as sentence/paragraph breaks
    (at most one blank line); other whitespace collapsed.
    """
    try:
        if not isinstance(text, str):
            text = "" if text is None else str(text)
        return _clean(text)
    except Exception:  # the contract is "never raises"; a bug here must not fail the request
        _log.exception("clean_text failed; returning the input's plain letters")
        return " ".join("".join(ch if ch.isalnum() else " " for ch in str(text)).split())


# =============================================================================
# split_sentences
# =============================================================================

_CJK_TERMINATORS = frozenset("。！？｡")
_TERMINATOR = re.compile(r"[.!?…。！？｡‼⁇⁈⁉]++[\"'”’)\]}»」』）〕】]*+")
_OPENERS = "\"'“‘([{«「『（"

# Abbreviations that sit before a name or word and never end a sentence by
# themselves, unless a typical sentence opener follows ("Main St. The ...").
_NAME_ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "mx", "dr", "prof", "rev", "hon", "st", "mt", "ft", "capt", "cpt",
        "lt", "sgt", "col", "gen", "maj", "adm", "gov", "sen", "rep", "pres", "fr", "sr",
        "jr", "vs", "cf", "e.g", "i.e", "viz", "ca", "approx", "dept", "est", "jan", "feb",
        "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mon", "tue",
        "wed", "thu", "fri", "sat", "sun", "ave", "blvd", "rd", "inc", "ltd", "co", "corp",
        "bros", "a.m", "p.m", "u.s", "u.k", "u.s.a", "ph.d",
    }
)  # fmt: skip
# Abbreviations that are ordinary words at a sentence end unless a number follows.
_NUMBER_ABBREVIATIONS = frozenset(
    {"no", "nos", "p", "pp", "fig", "figs", "vol", "ch", "sec", "art"}
)
# Abbreviations that commonly end a sentence: any capitalised word after them starts a new one.
_FINAL_ABBREVIATIONS = frozenset({"etc", "al"})
_SENTENCE_STARTERS = frozenset(
    {
        "A", "After", "An", "And", "As", "At", "Before", "But", "He", "Her", "His", "How",
        "I", "If", "In", "It", "Its", "My", "On", "Our", "She", "So", "That", "The", "Their",
        "Then", "There", "These", "They", "This", "Those", "We", "What", "When", "Where",
        "Why", "You",
    }
)  # fmt: skip
_DOTTED_ACRONYM = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
_NEXT_WORD = re.compile(r"\s*[\"'“‘(\[]?(\w+)")


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (
        0x3040 <= code <= 0x30FF  # kana
        or 0x3400 <= code <= 0x9FFF  # CJK ideographs
        or 0xAC00 <= code <= 0xD7AF  # Hangul
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFFEF  # full-width forms
        or 0x20000 <= code <= 0x2FFFF
    )


def _period_ends_sentence(line: str, period_at: int, next_word: str) -> bool:
    """Decide whether the single period at ``period_at`` ends a sentence."""
    token_start = line.rfind(" ", 0, period_at) + 1
    token = line[token_start:period_at].lstrip(_OPENERS)
    lowered = token.lower()
    if not token or not next_word:
        return True
    if lowered in _NUMBER_ABBREVIATIONS and next_word[0].isdigit():
        return False
    if lowered in _FINAL_ABBREVIATIONS:
        return next_word[0].isupper()
    if token[-1].isdigit():
        return True  # "in 1999. Then": digits are no abbreviation
    ambiguous = (
        lowered in _NAME_ABBREVIATIONS
        or is_title_abbreviation(token)  # "Sra. Souza", "sig. Rossi", "Hr. Weber"
        or (len(token) == 1 and token.isalpha())  # initials: "J. R. R. Tolkien"
        or _DOTTED_ACRONYM.fullmatch(token) is not None  # "U.S", "Ph.D"
    )
    if ambiguous:
        return next_word in _SENTENCE_STARTERS
    return True


def _is_boundary(line: str, match: re.Match[str]) -> bool:
    terminators = match.group().rstrip("\"'”’)]}»」』）〕】")
    if any(ch in _CJK_TERMINATORS for ch in terminators):
        return True
    end = match.end()
    if end < len(line) and not (line[end].isspace() or _is_cjk(line[end])):
        return False  # "3.5", "e.g.,", "Yahoo!s": the mark is inside a token
    following = _NEXT_WORD.match(line, end)
    next_word = following.group(1) if following else ""
    if next_word[:1].islower():
        return False  # '"Stop!" he said.' / "I think... maybe"
    if terminators == ".":
        return _period_ends_sentence(line, match.start(), next_word)
    return True


def _has_words(piece: str) -> bool:
    # Private-use characters never survive clean_text; the frontend puts them
    # back as stand-ins for inline phonemes, which are words.
    return any(ch.isalnum() or "\ue000" <= ch <= "\uf8ff" for ch in piece)


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs are separated by a blank line; returns non-empty stripped paragraphs."""
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def split_sentences(text: str) -> list[str]:
    """Split text into sentences; never raises.

    Every newline is a boundary. Within a line, ``. ! ? …`` (followed by optional
    closing quotes or brackets) end a sentence when whitespace follows, except
    after abbreviations ("Dr.", "e.g.", "U.S."), initials ("J. R. R. Tolkien") and
    before a lowercase word; ``。！？`` always end one. Pieces without any letter or
    digit are attached to the sentence before them.
    """
    try:
        if not isinstance(text, str):
            text = str(text)
        sentences: list[str] = []
        for raw_line in text.split("\n"):
            line = " ".join(raw_line.split())
            start = 0
            for match in _TERMINATOR.finditer(line):
                if _is_boundary(line, match):
                    _append_sentence(sentences, line[start : match.end()])
                    start = match.end()
            _append_sentence(sentences, line[start:])
        return sentences
    except Exception:  # the contract is "never raises"
        _log.exception("split_sentences failed; returning the text as one sentence")
        stripped = str(text).strip()
        return [stripped] if stripped else []


def _append_sentence(sentences: list[str], piece: str) -> None:
    piece = piece.strip()
    if not piece:
        return
    if _has_words(piece):
        sentences.append(piece)
    elif sentences:
        sentences[-1] += piece if piece[0] in "\"')]}»」』）" else " " + piece


# =============================================================================
# split_for_budget
# =============================================================================

# Estimates of a piece's cost are scaled by this so most guesses land under budget
# and need no second measure() call.
_ESTIMATE_MARGIN = 0.9
_STRONG_CLAUSE = re.compile(r"[;:；：](?=\s)|—\s*|\s[-–]\s")
_COMMA = re.compile(r"[,，、](?=\s)|[，、]")
_CONJUNCTION = re.compile(
    r"\s(?=(?:and|but|or|nor|so|yet|because|although|though|while|whereas|which|unless"
    r"|until|since|when|where|if)\s)"
)
_WHITESPACE = re.compile(r"\s+")

Span = tuple[int, int]


def _cuts_after(pattern: re.Pattern[str]) -> Callable[[str], list[int]]:
    return lambda text: [m.end() for m in pattern.finditer(text)]


def _word_cuts(text: str) -> list[int]:
    return [m.end() for m in _WHITESPACE.finditer(text)]


def _character_cuts(text: str) -> list[int]:
    # Never separate a combining mark from its base letter.
    return [i for i in range(1, len(text)) if not unicodedata.category(text[i]).startswith("M")]


# Boundary kinds from most to least preferred.
_LEVELS: tuple[Callable[[str], list[int]], ...] = (
    _cuts_after(_STRONG_CLAUSE),
    _cuts_after(_COMMA),
    _cuts_after(_CONJUNCTION),
    _word_cuts,
    _character_cuts,
)


def _spans(text: str, cuts: list[int]) -> list[Span]:
    """Non-blank spans of ``text`` between cut positions."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(text)}), len(text)]
    spans = [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if text[a:b].strip()]
    return spans


def _pack(
    text: str, spans: list[Span], tokens_per_char: float, budget: int
) -> list[tuple[str, int]]:
    """Greedily group consecutive spans whose estimated cost fits; returns (piece, span count)."""
    target = budget * _ESTIMATE_MARGIN
    groups: list[tuple[str, int]] = []
    group_start, group_end, count = spans[0][0], spans[0][1], 1
    for start, end in spans[1:]:
        if (end - group_start) * tokens_per_char > target:
            groups.append((text[group_start:group_end].strip(), count))
            group_start, count = start, 0
        group_end = end
        count += 1
    groups.append((text[group_start:group_end].strip(), count))
    return groups


def _split_over_budget(
    text: str, cost: int, measure: Callable[[str], int], budget: int, level: int
) -> list[str]:
    """Split ``text`` (whose measured cost exceeds ``budget``) at the best boundaries."""
    for depth in range(level, len(_LEVELS)):
        spans = _spans(text, _LEVELS[depth](text))
        if len(spans) > 1:
            break
    else:
        raise InvalidInput(
            f"budget of {budget} tokens is too small: a single character costs {cost}",
            field="budget",
            limit=budget,
            value=cost,
        )
    pieces: list[str] = []
    for piece, count in _pack(text, spans, cost / len(text), budget):
        piece_cost = measure(piece)
        if piece_cost <= budget:
            pieces.append(piece)
        else:
            # Several units: the estimate was off, retry at this level with this piece's
            # own cost ratio. One unit: it must be cut at a finer kind of boundary.
            deeper = depth if count > 1 else depth + 1
            pieces.extend(_split_over_budget(piece, piece_cost, measure, budget, deeper))
    return pieces


def split_for_budget(sentence: str, measure: Callable[[str], int], budget: int) -> list[str]:
    """Split ``sentence`` so that ``measure(piece) <= budget`` for every piece.

    Boundaries are preferred in this order: ``; : —`` (and a spaced dash), commas,
    before a conjunction, between words, and finally between characters for a
    single over-long word. Pieces keep their punctuation and are stripped.

    ``measure`` (e.g. phoneme-token count) is assumed expensive: it is called once
    on the whole sentence, once per produced piece, and once more for each piece
    whose length-based estimate turned out too optimistic.

    Raises InvalidInput when ``budget`` < 1 or a single character exceeds it.
    """
    if budget < 1:
        raise InvalidInput(
            f"budget must be at least 1 token, got {budget}", field="budget", limit=1, value=budget
        )
    text = sentence.strip()
    if not text:
        return []
    cost = measure(text)
    if cost <= budget:
        return [text]
    return _split_over_budget(text, cost, measure, budget, 0)


# =============================================================================
# Streaming and pauses
# =============================================================================

# A first chunk shorter than this sounds clipped ("Well," on its own); skip such boundaries.
_MIN_FIRST_CHUNK_WORDS = 3
_CLAUSE_END = re.compile(r"[,;:，、；：—](?=\s)|—")


def first_chunk_for_streaming(
    sentences: list[str], max_words: int = 12, *, min_tail_words: int = 1
) -> list[str]:
    """Shorten the first sentence so the first audio can be produced quickly.

    If the first sentence has more than ``max_words`` words, it is cut at its first
    clause boundary (``, ; : —``) that leaves at least three and at most
    ``max_words`` words in front, else right after ``max_words`` words; a cut that
    would leave fewer than ``min_tail_words`` words behind is not made (a lone
    last word, spoken as a chunk of its own, is the least intelligible piece).
    Returns a new list; the input is not modified.
    """
    if max_words < 1:
        raise InvalidInput(
            f"max_words must be at least 1, got {max_words}",
            field="max_words",
            limit=1,
            value=max_words,
        )
    if not sentences:
        return []
    first, rest = sentences[0], list(sentences[1:])
    words = first.split()
    if len(words) <= max_words:
        return [first, *rest]
    for match in _CLAUSE_END.finditer(first):
        head_words = len(first[: match.end()].split())
        if head_words > max_words:
            break
        if head_words >= _MIN_FIRST_CHUNK_WORDS:
            head, tail = first[: match.end()].strip(), first[match.end() :].strip()
            if tail and len(tail.split()) >= min_tail_words:
                return [head, tail, *rest]
    if len(words) - max_words < min_tail_words:
        return [first, *rest]
    return [" ".join(words[:max_words]), " ".join(words[max_words:]), *rest]


# Pauses in seconds after a piece, by how it ends. Values follow common TTS/reading
# practice: a paragraph break is the longest breath, ? and ! carry a slightly longer
# stop than a full stop, clause marks a short breath, and a cut made only to fit the
# token budget gets just enough silence to hide the seam.
PAUSE_PARAGRAPH_S = 0.5
PAUSE_QUESTION_EXCLAMATION_S = 0.4
PAUSE_ELLIPSIS_S = 0.4
PAUSE_FULL_STOP_S = 0.3
PAUSE_SEMICOLON_COLON_S = 0.18
PAUSE_DASH_S = 0.15
PAUSE_COMMA_S = 0.12
PAUSE_HARD_SPLIT_S = 0.05
_TRAILING_CLOSERS = "\"')]}»」』）〕】 \t"


def sentence_pause_s(sentence: str, *, paragraph_end: bool = False) -> float:
    """Natural silence in seconds after ``sentence`` (a sentence or a piece of one).

    ``paragraph_end`` (or a trailing newline on the piece) gives 0.5 s; otherwise
    by the last mark, ignoring closing quotes/brackets: ? ! → 0.4, ellipsis → 0.4,
    . 。→ 0.3, ; : → 0.18, — → 0.15, , 、→ 0.12, nothing (a word or character
    split made for the token budget) → 0.05.
    """
    if paragraph_end or sentence.endswith("\n"):
        return PAUSE_PARAGRAPH_S
    stripped = sentence.rstrip(_TRAILING_CLOSERS + "\n")
    if not stripped:
        return PAUSE_HARD_SPLIT_S
    last = stripped[-1]
    if last in "?!？！‼⁇⁈⁉":
        return PAUSE_QUESTION_EXCLAMATION_S
    if stripped.endswith("...") or last == "…":
        return PAUSE_ELLIPSIS_S
    if last in ".。｡":
        return PAUSE_FULL_STOP_S
    if last in ";:；：":
        return PAUSE_SEMICOLON_COLON_S
    if last in "—-–":
        return PAUSE_DASH_S
    if last in ",，、":
        return PAUSE_COMMA_S
    return PAUSE_HARD_SPLIT_S
