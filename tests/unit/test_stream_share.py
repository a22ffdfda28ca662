"""Identical concurrent streams share one render (runtime/shared_render.py).

No models: the "render" is a generator that counts how often it was stepped
and whether it was closed, so each test says exactly what the engine would
have been asked for.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Generator, Iterator

import pytest

from voxclone.errors import Cancelled
from voxclone.runtime.shared_render import SharedStream, StreamShares


class Render:
    """A fake render of ``parts`` parts; ``gate`` (if set) holds each part."""

    def __init__(self, parts: int = 4, gate: threading.Semaphore | None = None) -> None:
        self.parts = parts
        self.steps = 0
        self.closed = False
        self.gate = gate
        self.builds = 0
        self.abandoned: SharedStream | None = None

    def __call__(self, shared: SharedStream) -> Iterator[bytes]:
        self.builds += 1
        self.abandoned = shared
        return self._run()

    def _run(self) -> Iterator[bytes]:
        try:
            for i in range(self.parts):
                if self.gate is not None:
                    self.gate.acquire()
                self.steps += 1
                yield f"part{i}".encode()
        finally:
            self.closed = True


def test_identical_streams_share_one_render() -> None:
    shares = StreamShares()
    render = Render()
    leader, led = shares.lead("k", render)
    assert led
    first = next(leader)
    follower = shares.follow("k")
    assert follower is not None
    # The follower starts from the first part, then follows the same render.
    assert list(follower) == [b"part0", b"part1", b"part2", b"part3"]
    assert [first, *leader] == [b"part0", b"part1", b"part2", b"part3"]
    assert render.builds == 1 and render.steps == 4
    assert len(shares) == 0  # the render ended: later requests find the cache


def _close(reader: Iterator[bytes] | None) -> None:
    """Close a reader as a client that disconnects does (readers are generators)."""
    assert isinstance(reader, Generator)
    reader.close()


def test_a_leader_that_leaves_does_not_cut_off_a_follower() -> None:
    shares = StreamShares()
    render = Render()
    leader, _ = shares.lead("k", render)
    assert next(leader) == b"part0"
    follower = shares.follow("k")
    assert follower is not None
    _close(leader)  # the first client disconnected
    assert not render.closed
    assert list(follower) == [b"part0", b"part1", b"part2", b"part3"]
    assert render.steps == 4


def test_the_render_stops_when_every_reader_left() -> None:
    shares = StreamShares()
    render = Render()
    leader, _ = shares.lead("k", render)
    follower = shares.follow("k")
    assert follower is not None
    next(leader)
    next(follower)
    _close(leader)
    assert not render.closed
    _close(follower)
    assert render.closed and render.steps == 1
    # A stream that stopped early is not joined: a new request renders afresh.
    assert shares.follow("k") is None
    _, led = shares.lead("k", Render())
    assert led


def test_a_reader_dropped_before_its_first_step_still_leaves() -> None:
    # The HTTP layer may drop a response before iterating it (the client left
    # during set-up): the render must not wait for that reader forever.
    shares = StreamShares()
    render = Render()
    leader, _ = shares.lead("k", render)
    del leader
    gc.collect()
    assert render.abandoned is not None and render.abandoned.abandoned()
    assert shares.follow("k") is None


def test_abandoned_only_once_every_client_has_gone() -> None:
    shares = StreamShares()
    render = Render()
    gone = {"a": False, "b": False}
    leader, _ = shares.lead("k", render, cancelled=lambda: gone["a"])
    follower = shares.follow("k", cancelled=lambda: gone["b"])
    assert follower is not None
    shared = render.abandoned
    assert shared is not None
    gone["a"] = True
    assert not shared.abandoned()
    gone["b"] = True
    assert shared.abandoned()
    _close(leader)
    _close(follower)


def test_a_failed_render_fails_every_reader() -> None:
    def failing(_shared: SharedStream) -> Iterator[bytes]:
        yield b"part0"
        raise RuntimeError("engine failed")

    shares = StreamShares()
    leader, _ = shares.lead("k", failing)
    follower = shares.follow("k")
    assert follower is not None
    assert next(leader) == b"part0"
    with pytest.raises(RuntimeError):
        next(leader)
    assert next(follower) == b"part0"
    with pytest.raises(RuntimeError):
        next(follower)
    assert shares.follow("k") is None


def test_a_waiting_reader_notices_its_own_client_left() -> None:
    gate = threading.Semaphore(0)
    shares = StreamShares()
    render = Render(gate=gate)
    leader, _ = shares.lead("k", render)
    pulled = threading.Thread(target=lambda: next(leader, None))
    pulled.start()  # the leader pulls part 0 and waits on the gate
    time.sleep(0.2)
    follower = shares.follow("k", cancelled=lambda: True)
    assert follower is not None
    with pytest.raises(Cancelled):
        next(follower)  # waits behind the leader's pull, then sees its flag
    gate.release(4)
    pulled.join(timeout=5)
    _close(leader)


def test_concurrent_readers_each_get_every_part_once() -> None:
    shares = StreamShares()
    render = Render(parts=20)
    leader, _ = shares.lead("k", render)
    followers = [shares.follow("k") for _ in range(7)]
    results: list[list[bytes]] = []
    lock = threading.Lock()

    def read(reader: Iterator[bytes] | None) -> None:
        assert reader is not None
        got = list(reader)
        with lock:
            results.append(got)

    threads = [threading.Thread(target=read, args=(r,)) for r in [leader, *followers]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    expected = [f"part{i}".encode() for i in range(20)]
    assert len(results) == 8 and all(got == expected for got in results)
    assert render.steps == 20
