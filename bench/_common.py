"""What the load and soak benchmarks share: a throw-away server and its traffic.

Both drive a real server (``voxclone.devserver``) on 127.0.0.1 with a
temporary ``VOXCLONE_HOME``, sample its memory and send short sentences that
no cache has seen.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from voxclone.devserver import APP_LAUNCHER, ServerProcess, running_server

READY_TIMEOUT_S = 300.0  # cold model load on a busy machine
# Measure the engine and service, not the per-client limiter.
RATE_LIMIT_OFF = {
    "VOXCLONE_RATE_LIMIT_PER_MINUTE": "1000000",
    "VOXCLONE_RATE_LIMIT_BURST": "1000000",
}

_WORDS = (
    "river",
    "garden",
    "window",
    "silver",
    "morning",
    "letter",
    "forest",
    "candle",
    "harbor",
    "winter",
    "pepper",
    "lantern",
    "meadow",
    "thunder",
    "pillow",
    "marble",
)


@contextmanager
def throwaway_server(
    prefix: str, env: Mapping[str, str], *, launcher: str = APP_LAUNCHER
) -> Iterator[ServerProcess]:
    """A ready server on a temporary home (named ``prefix``…), removed afterwards."""
    with (
        tempfile.TemporaryDirectory(prefix=prefix) as home,
        running_server(Path(home), env, timeout_s=READY_TIMEOUT_S, launcher=launcher) as server,
    ):
        yield server


def rss_mb(process: subprocess.Popen[bytes]) -> float:
    """Resident memory of ``process`` and all its children, in MiB (NaN once it is gone)."""
    try:
        proc = psutil.Process(process.pid)
        total = proc.memory_info().rss
        for child in proc.children(recursive=True):
            total += child.memory_info().rss
    except psutil.Error:
        return float("nan")
    return total / (1 << 20)


def miss_text(n: int) -> str:
    """A short sentence that differs for every ``n``, so it misses every cache."""
    a, b = _WORDS[n % len(_WORDS)], _WORDS[(n * 7 + 3) % len(_WORDS)]
    return f"The {a} and the {b}, number {n}."


def bench_home(prefix: str) -> Path:
    """A throw-away ``VOXCLONE_HOME`` that reuses the assembled model (no rebuild)."""
    from voxclone.config import Settings

    home = Path(tempfile.mkdtemp(prefix=prefix))
    shared_models = Settings().models_dir
    if shared_models.is_dir():
        (home / "models").symlink_to(shared_models, target_is_directory=True)
    return home


def write_result(out: Path, result: Mapping[str, object], markdown: str) -> None:
    """``out`` (JSON) and its ``.md`` sibling, and the Markdown on stdout."""
    import json

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=float))
    out.with_suffix(".md").write_text(markdown)
    print(markdown)


def save_figure(fig: object, path: Path) -> None:
    """Lay out, write (110 dpi) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()  # type: ignore[attr-defined]
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)  # type: ignore[attr-defined]
    plt.close(fig)  # type: ignore[arg-type]


@dataclass(frozen=True)
class StreamedPcm:
    """A streamed request as a listener playing it at real time hears it."""

    audio: Any  # float32 samples
    first_s: float  # to the first non-empty bytes
    total_s: float  # to the end of the stream
    stall_s: float  # silence heard after the first audio, waiting for the next bytes


def stream_pcm(speech: Any, request: Any, sample_rate: int = 24_000) -> StreamedPcm:
    """Stream ``request`` (format "pcm") through ``speech`` (the public
    ``SpeechRouter``/``SpeechService.stream``); playback starts with the first
    audio and each later part plays once the earlier ones have."""
    import time

    import numpy as np

    started = time.perf_counter()
    _, parts = speech.stream(request)
    pieces = []
    first: float | None = None
    played_until = 0.0  # when what has arrived so far ends, from the start
    stall = 0.0
    for part in parts:
        samples = np.frombuffer(part, dtype="<i2").astype(np.float32) / 32768.0
        if not samples.size:
            continue
        now = time.perf_counter() - started
        if first is None:
            first = played_until = now
        elif now > played_until:
            stall += now - played_until
            played_until = now
        played_until += samples.size / sample_rate
        pieces.append(samples)
    total = time.perf_counter() - started
    audio = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
    return StreamedPcm(audio, first if first is not None else total, total, stall)
