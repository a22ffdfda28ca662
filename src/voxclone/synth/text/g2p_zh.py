"""Mandarin text → Kokoro phonemes with misaki's Chinese G2P.

misaki's ``ZHG2P`` in its default (legacy) mode is the front end Kokoro v1.0
was trained with: jieba word segmentation, pypinyin readings, pinyin → IPA
with tone arrows (→ ↗ ↓ ↘) and Kokoro's own symbols (ꭧ, ʦ, ɨ …). Everything
it needs ships inside the registry packages (jieba's dictionary, pypinyin's
tables): verified to run with no network. jieba writes a prefix-dictionary
cache to the temp directory on first use (~1 s); later processes reuse it.

Numbers are spelled by our own normalizer before this runs, so misaki's
cn2an pass finds no digits to rewrite.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable
from typing import Any


class ChineseG2P:
    """misaki ZHG2P wrapper. Thread-safe, loaded on first use."""

    language = "zh"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._g2p: Callable[[str], Any] | None = None

    def _load(self) -> Callable[[str], Any]:
        if self._g2p is None:
            # jieba imports pkg_resources (deprecation warning) and logs its
            # dictionary build at INFO on the root-level "jieba" logger.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                import jieba
                from misaki.zh import ZHG2P

            jieba.setLogLevel(logging.WARNING)
            self._g2p = ZHG2P()
        return self._g2p

    def phonemize(self, text: str) -> str:
        text = text.strip()
        if not text:
            return ""
        # jieba's lazy dictionary load is not thread-safe; one call at a time.
        with self._lock:
            phonemes, _ = self._load()(text)
        return " ".join(str(phonemes).split())
