"""A stored voice as ``voxclone clone`` and ``voxclone voices show`` print it.

By default a few lines a person reads: which voice it is, what happened to it
(version and source), the report's verdict (which voice speaks, and why), the
few figures worth knowing and any warning. The whole record, as the HTTP API
returns it, is ``--json``: printed as it was before, it was ~100 lines (the
style recipe alone is 54 prosody weights and as many timbre weights) with the
one sentence a user wants buried in the middle. The style recipe is how the
voice's style was mixed, kept to re-clone it; it is left out of both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

INTERNAL_QUALITY_KEYS = frozenset({"style_recipe"})

_SOURCES = {
    "instant": "instant clone",
    "refined": "refined clone",
    "blend": "saved blend",
    "builtin": "built-in voice",
}


def voice_record(voice: Any) -> dict[str, Any]:
    """A stored voice (a VoiceRecord, or the API's JSON of one) as the API's
    JSON, without the internal style recipe."""
    if not isinstance(voice, Mapping):
        from voxclone.api.schemas import VoiceOut

        voice = VoiceOut.of(voice).model_dump()
    record = dict(voice)
    quality = record.get("quality") or {}
    record["quality"] = {k: v for k, v in quality.items() if k not in INTERNAL_QUALITY_KEYS}
    return record


def print_voice(voice: Any, *, as_json: bool) -> None:
    record = voice_record(voice)
    if as_json:
        print(json.dumps(record, indent=1))
        return
    for line in summary_lines(record):
        print(line)


def summary_lines(record: Mapping[str, Any]) -> list[str]:
    """What a person reads about a voice, in a few lines."""
    quality: Mapping[str, Any] = record.get("quality") or {}
    source = str(record.get("source", ""))
    about = [f"version {record.get('version')}, {_SOURCES.get(source, source)}"]
    about += [str(record[k]) for k in ("engine", "language") if record.get(k)]
    lines = [f"{record.get('name')} ({record.get('id')}): {', '.join(about)}"]
    speaks = _speaks(quality)
    if speaks:
        lines.append(speaks)
    figures = _figures(quality)
    if figures:
        lines.append(figures)
    lines += [f"warning: {warning}" for warning in quality.get("warnings") or []]
    return lines


def _speaks(quality: Mapping[str, Any]) -> str | None:
    """The one sentence that says which voice speaks: the report's verdict
    (the stock check's comparison, or what a refinement changed)."""
    verdict = quality.get("verdict")
    if verdict:
        return f"{verdict[0].upper()}{verdict[1:]}"
    stock = quality.get("replaced_by_stock_voice")
    if stock:
        return f"Speaks as the built-in voice {stock}, given the recording's tone"
    return None


def _figures(quality: Mapping[str, Any]) -> str | None:
    parts = []
    similarity = quality.get("similarity")
    if similarity is not None:
        parts.append(f"similarity to the reference {similarity:.2f}")
    wer = quality.get("wer")
    if wer is not None:
        parts.append(f"word error rate {wer:.0%}")
    seconds = quality.get("reference_seconds")
    if seconds:
        parts.append(f"{seconds:g} s of speech")
    snr = quality.get("snr_db")
    if snr is not None:
        parts.append(f"SNR {snr:.0f} dB")
    if not parts:
        return None
    if similarity is None and "wer" in quality:
        parts.insert(0, "not measured yet (the quality report follows)")
    return "; ".join(parts)
