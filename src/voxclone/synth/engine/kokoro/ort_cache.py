"""ONNX Runtime's optimized copy of the Kokoro graph, saved once per host.

Optimizing the int8 graph is most of a session's start-up (docs/design.md: 1.26 s
per session; loading the saved optimized copy with optimizations off: 0.55 s,
bit-identical output). The optimized graph may contain kernels and layouts
chosen for this CPU and this ONNX Runtime build, so the file name carries a
key over the ORT version, the CPU's identity (model name and instruction-set
flags), the providers and the source model's SHA-256; any change means a new
key, the copy is rebuilt and the stale ones are removed.

Several processes may start at once: building takes an exclusive file lock,
writes to a temporary name and renames atomically, so a reader sees either
no copy or a complete one. The copy is written 0600 with its SHA-256
recorded beside it (synth/built_models.py); each load checks it first, and a
copy that fails the check or fails to load is deleted and rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
import platform
from collections.abc import Callable
from pathlib import Path

import onnxruntime as ort

from voxclone.synth import built_models
from voxclone.synth.engine.kokoro.assets import exclusive_lock
from voxclone.synth.files import publish, sha256_file, temp_path_for

log = logging.getLogger(__name__)

CACHE_DIRNAME = "ort-optimized"
PREFIX = "kokoro-"
SUFFIX = ".opt.onnx"

# A session on a model file (its path) or on a serialized model (bytes).
SessionFactory = Callable[[str | bytes, ort.SessionOptions], ort.InferenceSession]


def cpu_identity() -> str:
    """What makes a CPU run the same optimized graph: model name and feature flags."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    wanted = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "flags", "Features", "CPU part") and key not in wanted:
            wanted[key] = " ".join(sorted(value.split()))
    fields = [f"{k}={v}" for k, v in sorted(wanted.items())]
    return "|".join([platform.machine(), *fields]) or platform.processor() or "unknown"


def cache_key(
    model_sha256: str,
    providers: list[str],
    *,
    cpu: str | None = None,
    ort_version: str | None = None,
) -> str:
    parts = [
        ort_version or ort.__version__,
        cpu if cpu is not None else cpu_identity(),
        ",".join(providers),
        model_sha256,
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


class OptimizedModelCache:
    """Hands out sessions on the cached optimized graph, building it when missing."""

    def __init__(
        self,
        models_dir: Path,
        source: Path,
        key: str,
        *,
        prepare: Callable[[Path], bytes | None] | None = None,
        part: str = "",
    ) -> None:
        """``part``: which piece of a split graph this copy is (head_piece.py);
        each part keeps its own copy, and only its own stale ones are removed."""
        self._dir = models_dir / CACHE_DIRNAME
        self._source = source
        # Edits the source graph before it is optimized (e.g. an extra output);
        # None from it means: use the source unchanged.
        self._prepare = prepare
        self._prefix = f"{PREFIX}{part}-" if part else PREFIX
        self._key_chars = len(key)
        self.path = self._dir / f"{self._prefix}{key}{SUFFIX}"
        # True when the last open() had to optimize the source graph itself.
        self.built = False

    def open(self, opts: ort.SessionOptions, factory: SessionFactory) -> ort.InferenceSession:
        """A session on the optimized copy (``opts`` is changed as needed)."""
        self.built = False
        if self.path.exists():
            session = self._load(opts, factory)
            if session is not None:
                return session
        with exclusive_lock(self._dir / ".build.lock"):
            if self.path.exists():  # another process built it meanwhile
                session = self._load(opts, factory)
                if session is not None:
                    return session
            return self._build(opts, factory)

    def _load(
        self, opts: ort.SessionOptions, factory: SessionFactory
    ) -> ort.InferenceSession | None:
        # A tampered or truncated copy is never handed to ONNX Runtime.
        if not built_models.matches(self.path, "optimized Kokoro graph"):
            return None
        # The graph is already optimized: optimizing again would only cost time.
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            return factory(str(self.path), opts)
        except Exception:  # a truncated or foreign file: rebuild it
            log.warning("optimized Kokoro graph unusable; rebuilding", exc_info=True)
            self.path.unlink(missing_ok=True)
            built_models.record_path(self.path).unlink(missing_ok=True)
            return None

    def _build(self, opts: ort.SessionOptions, factory: SessionFactory) -> ort.InferenceSession:
        self._dir.mkdir(parents=True, exist_ok=True)
        tmp = temp_path_for(self.path)  # ORT writes the file; it is published below
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.optimized_model_filepath = str(tmp)
        # ORT warns on stderr that a graph saved at this level is tied to this
        # machine; the cache key (ORT version + CPU) already says so, and the
        # warning broke the CLI's one-line errors on a first start.
        opts.log_severity_level = 3
        try:
            edited = self._prepare(self._source) if self._prepare is not None else None
            session = factory(edited if edited is not None else str(self._source), opts)
            if tmp.exists() and tmp.stat().st_size > 0:
                # ORT wrote it with the umask's mode (0644 outside the server).
                built_models.private(tmp)
                built_models.record(self.path, sha256_file(tmp))
                publish(tmp, self.path)
                self.built = True
                self._remove_stale()
                log.info("saved optimized Kokoro graph", extra={"path": self.path.name})
        finally:
            tmp.unlink(missing_ok=True)
        return session

    def _remove_stale(self) -> None:
        """Copies made for another ORT version, CPU or model are never used again."""
        # The key's exact length: the whole graph's copies never match a part's.
        for old in self._dir.glob(f"{self._prefix}{'?' * self._key_chars}{SUFFIX}"):
            if old != self.path:
                old.unlink(missing_ok=True)
                built_models.record_path(old).unlink(missing_ok=True)
