"""One decision at the edge about JSON bodies the rest of the code must never see.

Python's ``json`` module accepts things no API field can use and that crash
later, far from the request: ``NaN``/``Infinity`` and numbers that overflow to
infinity (a JSON response cannot even carry them back in an error), lone
UTF-16 surrogates from ``"\\ud800"`` escapes (every later ``.encode()`` fails),
and nesting deep enough to exhaust the interpreter's recursion limit. Every
JSON request body is parsed once here (by ``body_guard.BodyGuardMiddleware``,
which decides which bodies are JSON), bounded, and refused with a 400 that
names the offending field; routes then read a body known to be clean
(``/v1/tts`` takes the tree parsed here; FastAPI's body models parse it again).

Form fields and query parameters cannot carry these (they arrive as UTF-8
text and are decoded with replacement); numbers in them are checked by the
request models (``allow_inf_nan=False``).
"""

from __future__ import annotations

import json
import math
from typing import Any

# Deeper than any request model (TTSRequest is flat); far below the recursion limit.
MAX_JSON_DEPTH = 32


class UnsafeJSON(ValueError):
    def __init__(self, message: str, field: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class _NonFinite:
    """Stands in for NaN, an infinity or an overflowing number until its path is known."""

    def __init__(self, text: str) -> None:
        self.text = text[:40]


def _finite_float(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _path(parts: list[str]) -> str | None:
    return ".".join(parts) if parts else None


def _check_tree(root: Any) -> None:
    """Depth and surrogates, walked without recursion (the tree may be deep)."""
    stack: list[tuple[Any, list[str], int]] = [(root, [], 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, _NonFinite):
            raise UnsafeJSON(
                f"{value.text} is not a finite number; send a number in the field's range",
                _path(path),
            )
        if isinstance(value, str):
            if has_lone_surrogate(value):
                raise UnsafeJSON(
                    "text contains a lone UTF-16 surrogate (invalid Unicode)", _path(path)
                )
            continue
        if not isinstance(value, dict | list):
            continue
        if depth >= MAX_JSON_DEPTH:
            raise UnsafeJSON(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", _path(path))
        if isinstance(value, dict):
            for key, item in value.items():
                if has_lone_surrogate(key):
                    raise UnsafeJSON(
                        "a field name contains a lone UTF-16 surrogate (invalid Unicode)",
                        _path(path),
                    )
                stack.append((item, [*path, key[:40]], depth + 1))
        else:
            for index, item in enumerate(value):
                stack.append((item, [*path, str(index)], depth + 1))


# What check_json returns for text that is not JSON at all.
NOT_JSON = object()


def check_json(raw: bytes) -> Any:
    """Raise ``UnsafeJSON`` if ``raw`` parses to something no route may see;
    else return what it parsed to (the body guard keeps it, as
    ``body_guard.PARSED_JSON``, for a route that reads its body itself).

    Text that is not JSON at all passes (as :data:`NOT_JSON`): the route's own
    parser reports it as it always has.
    """
    try:
        tree = json.loads(raw, parse_constant=_NonFinite, parse_float=_finite_float)
    except RecursionError:
        raise UnsafeJSON(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", None) from None
    except ValueError:
        return NOT_JSON
    # Big integers stay exact in Python; the models' ranges refuse them.
    _check_tree(tree)
    return tree
