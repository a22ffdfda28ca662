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


def stream_pcm(speech: Any, request: Any) -> tuple[Any, float, float]:
    """Stream ``request`` (format "pcm") through ``speech`` (the public
    ``SpeechRouter``/``SpeechService.stream``): the audio as float32, the
    seconds to its first non-empty bytes and to its end."""
    import time

    import numpy as np

    started = time.perf_counter()
    _, parts = speech.stream(request)
    pieces = []
    first = None
    for part in parts:
        samples = np.frombuffer(part, dtype="<i2").astype(np.float32) / 32768.0
        if first is None and samples.size:
            first = time.perf_counter() - started
        pieces.append(samples)
    total = time.perf_counter() - started
    return np.concatenate(pieces), first if first is not None else total, total
