"""Every file of the hostile corpus, posted to enrollment: a 4xx with the JSON error
body, and the server's memory stays flat. The corpus is generated at test time by
scripts/make_hostile_corpus.py into tests/data/hostile/ (not committed)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pytest
from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[2]
CORPUS_DIR = ROOT / "tests" / "data" / "hostile"
# Growth of the process's resident memory over the whole corpus, after a warm-up
# upload; a decoder that materialised a bomb would add hundreds of MB.
MAX_RSS_GROWTH_MB = 64


@pytest.fixture(scope="module")
def corpus(repo_script: Callable[[str], ModuleType]) -> list[Path]:
    return list(repo_script("make_hostile_corpus").make_corpus(CORPUS_DIR))


def _enroll(client: TestClient, path: Path) -> Any:
    return client.post(
        "/v1/voices",
        data={"name": path.stem[:60], "consent": "true", "consent_statement": "I agree."},
        files={"audio": (path.name, path.read_bytes(), "application/octet-stream")},
    )


def test_hostile_uploads_are_4xx_with_flat_memory(
    client: TestClient, runtime: Any, corpus: list[Path]
) -> None:
    if getattr(runtime, "voices", None) is None:
        pytest.skip("the runtime has no voice service")
    assert len(corpus) >= 30
    # The runtime is the session's: other modules' voices may already be in it.
    voices_before = runtime.voice_store.count()
    process = psutil.Process()
    _enroll(client, corpus[0])  # warm-up: first-use allocations are not growth
    gc.collect()
    before = process.memory_info().rss
    answers: dict[str, int] = {}
    for path in corpus:
        r = _enroll(client, path)
        answers[path.name] = r.status_code
        assert 400 <= r.status_code < 500, (path.name, r.status_code, r.text[:300])
        error = r.json()["error"]
        assert error["code"] and error["message"], (path.name, r.text[:300])
    gc.collect()
    growth_mb = (process.memory_info().rss - before) / (1 << 20)
    assert growth_mb < MAX_RSS_GROWTH_MB, (growth_mb, answers)
    # Nothing was enrolled (read from the store: after ~40 uploads the rate
    # limiter may answer a further HTTP request with 429).
    assert runtime.voice_store.count() == voices_before
