"""The one LRU map (voxclone/lru.py) behind the caches."""

from __future__ import annotations

import pytest

from voxclone.lru import Lru


def test_count_bound_evicts_the_least_recently_used() -> None:
    lru: Lru[str, int] = Lru(2)
    assert lru.put("a", 1) == []
    assert lru.put("b", 2) == []
    assert lru.get("a") == 1  # "b" is now the least recently used
    assert lru.put("c", 3) == [("b", 2)]
    assert list(lru) == ["a", "c"]
    assert lru.get("b") is None


def test_weight_bound_counts_replacements_once() -> None:
    lru: Lru[str, bytes] = Lru(max_weight=10, weigh=len)
    lru.put("a", b"12345")
    lru.put("a", b"123")  # replaces: 3 bytes, not 8
    assert lru.weight == 3
    assert lru.put("b", b"1234567") == []
    assert lru.put("c", b"1") == [("a", b"123")]
    assert lru.weight == 8
    assert lru.pop("b") == b"1234567"
    assert lru.weight == 1 and len(lru) == 1 and "c" in lru


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError):
        Lru(0)
    with pytest.raises(ValueError):
        Lru(max_weight=10)  # a weight bound needs a weigh function
