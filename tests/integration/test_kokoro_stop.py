"""Kokoro's running call cut from another thread (RunOptions.terminate): the
barge-in path of issue 48, on the real model."""

from __future__ import annotations

import threading
import time
from typing import cast

import pytest

from voxclone.errors import Cancelled
from voxclone.synth.engine.base import SynthItem
from voxclone.synth.engine.call_stop import CallStop, stoppable

pytestmark = [pytest.mark.models, pytest.mark.timed]

LONG = " ".join(["This sentence is one of many that the agent will never finish."] * 3)


def test_a_stopped_call_ends_at_once_and_the_session_still_speaks(runtime: object) -> None:
    engine = runtime.engines["kokoro"].engine  # type: ignore[attr-defined]
    assert stoppable(cast(object, engine))  # not narrowed: the test also calls Engine methods
    tokenizer = engine.tokenizer()
    tokens = tokenizer.token_ids(tokenizer.phonemize(LONG, "en-us"))[:400]
    pack = next(iter(engine.style_packs().values()))
    stop = CallStop()
    stopped_at: list[float] = []

    def cut() -> None:
        time.sleep(0.3)  # well inside a 400-token call (>= 3 s on 2 cores)
        stopped_at.append(time.perf_counter())
        stop.stop()

    cutter = threading.Thread(target=cut)
    cutter.start()
    started = time.perf_counter()
    with pytest.raises(Cancelled):
        engine.synthesize([SynthItem(tokens, pack, 1.0)], stop=stop)
    ended = time.perf_counter()
    cutter.join()
    late_s = ended - stopped_at[0]
    print(f"kokoro stop: run ended {late_s * 1000:.1f} ms after the stop")
    assert ended - started < 2.0 and late_s < 1.0
    # Only that run was cut: the next call (no stop, the shared options) speaks.
    short = tokenizer.token_ids(tokenizer.phonemize("Hello.", "en-us"))
    (audio,) = engine.synthesize([SynthItem(short, pack, 1.0)])
    assert audio.size > 4800
    # A stop set before the call: nothing runs.
    gone = CallStop()
    gone.stop()
    with pytest.raises(Cancelled):
        engine.synthesize([SynthItem(short, pack, 1.0)], stop=gone)
