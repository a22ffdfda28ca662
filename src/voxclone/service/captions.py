"""Word timestamps while a request renders: engine token times → output time → original words.

A chunk's token times are in the engine's audio for that chunk. Between it
and the output the audio is (1) time-scaled by the tempo DSP (WSOLA, when the
requested speed is beyond the engine's own), which stretches uniformly, so
times scale by output/input length, and (2) trimmed, faded and placed by the
joiner after the previous pieces and pauses: ``PieceJoiner.last_origin`` says
where the piece's first sample landed. Word times are clamped to the kept
samples of their piece, so a word never lies in a pause.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from voxclone.synth.audio.join import PieceJoiner
from voxclone.synth.engine.base import TokenTiming
from voxclone.synth.text.frontend import Chunk
from voxclone.synth.text.wordtimes import OriginalWordMapper, WordTime, chunk_word_times

# Tokens that are punctuation, not speech, in every engine vocabulary we use.
_PUNCTUATION = ';:,.!?¡¿—…"«»“”()'


@dataclass
class WordTrack:
    """Collects a request's word timestamps in output seconds, in order."""

    original_text: str
    sample_rate: int
    token_ids: Callable[[str], tuple[int, ...]]
    expand: Callable[[str], str] | None = None
    words: list[WordTime] = field(default_factory=list)
    # Chunk index → the timing slot its engine call fills.
    timings: dict[int, TokenTiming] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._mapper = OriginalWordMapper(self.original_text, self.expand)
        space = self.token_ids(" ")
        self._space = space[0] if space else -1
        self._silent = frozenset(self.token_ids(_PUNCTUATION))

    def slot(self, chunk_index: int) -> TokenTiming:
        timing = TokenTiming()
        self.timings[chunk_index] = timing
        return timing

    def chunk_done(self, chunk: Chunk, engine_len: int, out_len: int, joiner: PieceJoiner) -> None:
        """``chunk``'s audio was ``engine_len`` samples from the engine, ``out_len``
        after the controls, and ``joiner`` has just placed it."""
        timing = self.timings.pop(chunk.index, None)
        if timing is None or not timing.filled or engine_len == 0:
            return
        assert timing.starts_s is not None and timing.ends_s is not None
        scale = out_len / engine_len
        spoken = chunk_word_times(
            chunk.text,
            chunk.token_ids,
            timing.starts_s,
            timing.ends_s,
            space_id=self._space,
            silent_ids=self._silent,
        )
        sr = self.sample_rate
        lo, hi = joiner.last_body
        placed = []
        for w in spoken:
            start = min(max(joiner.last_origin + w.start_s * scale * sr, lo), hi)
            end = min(max(joiner.last_origin + w.end_s * scale * sr, start), hi)
            placed.append(WordTime(w.word, start / sr, end / sr))
        self.words.extend(self._mapper.feed(placed))

    def finish(self) -> None:
        self.words.extend(self._mapper.finish())
