"""JSON read from files we did not write (a model bundle's manifest, a weights
file's header), parsed with limits.

``json.loads`` recurses once per nesting level, so a deep document raises
RecursionError (not ValueError: callers catching parse errors let it through
as a traceback); it reads ``1e400`` as infinity and accepts ``NaN`` and
``Infinity``, which then overflow where the number is used (``int(inf)``).
:func:`load_json` refuses all three with :class:`JSONLimitError`, a
ValueError, before they can reach a caller. (HTTP bodies have their own
guard, ``api/input_guard.py``, which also names the field; this module sits
below the API so that the engine layer can use it.)
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

# Far deeper than any manifest or safetensors header, far below the recursion limit.
MAX_DEPTH = 64
# Strings are skipped when counting brackets: a "[" inside one opens nothing.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class JSONLimitError(ValueError):
    """The document is outside what :func:`load_json` accepts."""


def _too_deep(text: str, max_depth: int) -> bool:
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > max_depth:
            return True
    return False


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONLimitError(f"{text[:40]} is not a finite number")
    return value


def _no_constant(name: str) -> Any:
    raise JSONLimitError(f"{name} is not a JSON number")


def load_json(document: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``document`` (bytes as UTF-8); JSONLimitError when it nests deeper
    than ``max_depth`` or holds a number that is not finite, ValueError (or
    UnicodeDecodeError, one) when it is not JSON."""
    text = document.decode("utf-8") if isinstance(document, bytes) else document
    if _too_deep(text, max_depth):
        raise JSONLimitError(f"nested deeper than {max_depth} levels")
    return json.loads(text, parse_float=_finite, parse_constant=_no_constant)
