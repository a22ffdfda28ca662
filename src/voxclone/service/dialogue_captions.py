"""A dialogue's words as captions: JSON with speakers, SRT and WebVTT with speaker names.

Cues are grouped as single-voice captions group them
(``wordtimes.subtitle_cues``: up to 7 words, a new cue after a 0.6 s pause),
but never across turns, and each cue names who speaks: SRT as ``Name: words``
(the convention of subtitle files without voice markup), WebVTT with its
voice span ``<v Name>words`` (W3C WebVTT §4.2.2, which players show or style
per speaker).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from voxclone.service.dialogue import SpeakerWord
from voxclone.synth.text.wordtimes import WordTime, subtitle_cues


def speaker_words_json(words: Sequence[SpeakerWord]) -> list[dict[str, object]]:
    return [
        {
            "word": w.word,
            "start_time": round(w.start_s, 3),
            "end_time": round(w.end_s, 3),
            "speaker": w.speaker,
            "turn": w.turn,
        }
        for w in words
    ]


def speaker_cues(words: Sequence[SpeakerWord]) -> list[tuple[str, WordTime]]:
    """(speaker, cue) in order; a cue holds words of one turn only."""
    out: list[tuple[str, WordTime]] = []
    for _turn, group in groupby(words, key=lambda w: w.turn):
        turn_words = list(group)
        timed = [WordTime(w.word, w.start_s, w.end_s) for w in turn_words]
        out.extend((turn_words[0].speaker, cue) for cue in subtitle_cues(timed))
    return out


def _stamp(seconds: float, sep: str) -> str:
    ms = int(round(max(0.0, seconds) * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def _vtt_text(name: str) -> str:
    # A voice annotation ends at '>'; '&' and '<' are escaped as in cue text.
    return name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def speaker_srt(words: Sequence[SpeakerWord]) -> str:
    lines: list[str] = []
    for n, (speaker, cue) in enumerate(speaker_cues(words), 1):
        stamps = f"{_stamp(cue.start_s, ',')} --> {_stamp(cue.end_s, ',')}"
        lines += [str(n), stamps, f"{speaker}: {cue.word}", ""]
    return "\n".join(lines)


def speaker_vtt(words: Sequence[SpeakerWord]) -> str:
    lines = ["WEBVTT", ""]
    for speaker, cue in speaker_cues(words):
        stamps = f"{_stamp(cue.start_s, '.')} --> {_stamp(cue.end_s, '.')}"
        lines += [stamps, f"<v {_vtt_text(speaker)}>{_vtt_text(cue.word)}", ""]
    return "\n".join(lines)
