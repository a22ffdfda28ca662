"""Pocket TTS (Kyutai; flow LM + Mimi codec) behind the Engine protocol.

How it clones: the cleaned reference is resampled to the codec's rate, ended
on a short pause (as the package's own prompt path does) and encoded by Mimi
into latent frames (12.5 per second, 32 floats each). Those latents are the
voice's stored prompt (``make_prompt``): ~16 KB for 10 s, and they are the
expensive part. ``load_prompt`` turns them into the flow LM's conditioning
state (one transformer pass over the prompt frames; several MB of KV cache)
and keeps a few of those in memory, so a voice is prompted once per process.

How it speaks: text goes through the package's tokenizer (``input_kind
"text"``); generation is autoregressive, one latent frame (80 ms) per step,
decoded by Mimi in a second thread as frames arrive, which is the natural
streaming granularity (:meth:`PocketEngine.stream`). ``synthesize`` joins a
chunk's frames for the scheduler. The model has no duration, pitch or energy
control of its own: every control is post-processing (WSOLA for speed).

One model instance generates one item at a time (the package says it is not
thread-safe); the engine serializes calls with a lock.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from voxclone.errors import InvalidInput, ModelAssetError
from voxclone.lru import Lru
from voxclone.synth.audio.resample import resample
from voxclone.synth.engine.base import (
    EngineBase,
    EngineCapabilities,
    EngineVoice,
    SynthItem,
    Tokenizer,
)
from voxclone.synth.engine.pocket.bundle import (
    BundleError,
    InstalledBundle,
    check_sizes,
    installed_bundle,
)
from voxclone.synth.engine.pocket.loading import CONFIG_FILE, ENGINE, build_model

if TYPE_CHECKING:  # pragma: no cover
    from pocket_tts.models.tts_model import TTSModel

log = logging.getLogger(__name__)

PROMPT_FORMAT = "voxclone-pocket-prompt/1"
MAX_TOKENS = 50  # the package's own chunk size (MAX_TOKEN_PER_CHUNK)
# Longest prompt kept. Encoding cost, the KV state and every generated frame's
# attention grow with the prompt; upstream offers a 30 s cut, and a few
# seconds of clean speech already carry the voice (vendor's guidance). The cut
# is placed at the quietest 20 ms within the last 2 s before the limit, since
# a prompt that ends mid-word makes the model continue that word.
MAX_PROMPT_S = 15.0
WARMUP_TEXT = "Hello world."


@dataclass(frozen=True)
class PocketPrompt:
    """A voice's conditioning state, ready to be copied for one generation."""

    digest: str
    frames: int
    state: dict[str, dict[str, Any]] = field(repr=False)


class PocketTokenizer:
    """Text in, the model's own token ids out (no phonemes)."""

    def __init__(self, model: TTSModel, languages: tuple[str, ...]) -> None:
        self._model = model
        self._languages = languages

    @property
    def languages(self) -> tuple[str, ...]:
        return self._languages

    def phonemize(self, text: str, language: str) -> str:
        if language not in self._languages:
            from voxclone.errors import UnsupportedLanguage

            raise UnsupportedLanguage(
                f"language '{language[:16]}' is not supported by this Pocket TTS model; "
                f"supported: {', '.join(self._languages)}",
                field="language",
                limit=list(self._languages),
            )
        from pocket_tts.models.text_chunking import prepare_text_prompt

        m = self._model
        if not text.strip():
            return ""
        # The package's own clean-up (character rewrites, capital, final stop):
        # the model was trained on text shaped like that.
        prepared, _ = prepare_text_prompt(
            text,
            m.pad_with_spaces_for_short_inputs,
            m.remove_semicolons,
            m.append_terminal_punctuation,
            m.capitalize_first_letter,
            m.replace_characters,
        )
        return prepared

    def token_ids(self, units: str) -> tuple[int, ...]:
        if not units:
            return ()
        ids = self._model.flow_lm.conditioner.tokenizer.encode(units)
        return tuple(int(i) for i in ids)

    def text_of(self, ids: tuple[int, ...]) -> str:
        return str(self._model.flow_lm.conditioner.tokenizer.decode(list(ids)))


class PocketEngine(EngineBase):
    """Runs a Pocket TTS model from an installed bundle. Construct, ``load()``, ``warmup()``."""

    def __init__(
        self,
        models_dir: Path,
        *,
        bundle: str | None = None,
        torch_threads: int | None = None,
        frames_per_piece: int = 0,
        prompt_cache_size: int = 16,
        clone_threads: int | None = None,
    ) -> None:
        self._models_dir = models_dir
        self._bundle_name = bundle
        self._torch_threads = torch_threads
        # Cores for a clone's encoder + prompt passes (default: all of them).
        self._clone_thread_count = clone_threads if clone_threads else (os.cpu_count() or 1)
        # 0: decode whatever frames are queued in one call (the package's
        # default: lowest latency at the start, bigger pieces when the decoder
        # lags); n: at most n frames (80 ms each) per streamed piece.
        self._frames_per_piece = frames_per_piece
        self._bundle: InstalledBundle | None = None
        self._model: TTSModel | None = None
        self._tokenizer: PocketTokenizer | None = None
        self._warm = False
        self._load_lock = threading.Lock()
        self._gen_lock = threading.Lock()
        self._prompts: Lru[str, PocketPrompt] = Lru(max(1, prompt_cache_size))
        self._prompt_lock = threading.Lock()
        self.load_seconds: float | None = None

    # -- lifecycle ---------------------------------------------------------
    @property
    def bundle(self) -> InstalledBundle:
        if self._bundle is None:
            self._bundle = installed_bundle(self._models_dir, ENGINE, self._bundle_name)
        return self._bundle

    @property
    def model(self) -> TTSModel:
        if self._model is None:
            raise ModelAssetError("the Pocket TTS engine is not loaded")
        return self._model

    @property
    def ready(self) -> bool:
        return self._model is not None and self._warm

    def load(self) -> None:
        with self._load_lock:
            if self._model is not None:
                return
            started = time.perf_counter()
            bundle = self.bundle
            check_sizes(bundle)
            if not bundle.manifest.languages:
                raise BundleError(
                    f"model '{bundle.manifest.name}' lists no languages in its manifest.json"
                )
            if self._torch_threads:
                import torch

                # Process-wide in torch: an operator option, off by default.
                torch.set_num_threads(self._torch_threads)
            model = build_model(bundle.path, bundle.manifest)
            model.max_decoder_frames_per_call = self._frames_per_piece
            from voxclone.synth.engine.pocket.local_attention import use_block_local_attention

            use_block_local_attention(model.mimi.encoder_transformer)
            self._model = model
            self._tokenizer = PocketTokenizer(model, self._languages())
            self.load_seconds = time.perf_counter() - started
            log.info(
                "loaded Pocket TTS model",
                extra={"model": bundle.manifest.name, "seconds": round(self.load_seconds, 3)},
            )

    def warmup(self) -> None:
        self.load()
        # Half a second of quiet noise is a valid (meaningless) prompt; one
        # streamed piece exercises encoder, flow LM and decoder once.
        rng = np.random.default_rng(0)
        noise = (0.01 * rng.standard_normal(self.sample_rate // 2)).astype(np.float32)
        prompt = self._prompt_from_latents(self._encode(noise, self.sample_rate), digest="warmup")
        ids = self.tokenizer().token_ids(
            self.tokenizer().phonemize(WARMUP_TEXT, self._languages()[0])
        )
        for _piece in self.stream(SynthItem(token_ids=ids, prompt=prompt)):
            break
        self._warm = True

    # -- what it is ------------------------------------------------------------
    @property
    def sample_rate(self) -> int:
        return int(self.model.sample_rate)

    def _languages(self) -> tuple[str, ...]:
        return tuple(self.bundle.manifest.languages)

    @property
    def capabilities(self) -> EngineCapabilities:
        manifest = self.bundle.manifest
        weights = [f for f in manifest.files if f.name.endswith(".safetensors")]
        version = weights[0].sha256[:12] if weights else manifest.file(CONFIG_FILE).sha256[:12]
        return EngineCapabilities(
            engine=ENGINE,
            model_id=f"pocket-tts-{manifest.name}",
            model_version=version,
            sample_rate=self.sample_rate if self._model is not None else 24_000,
            max_tokens=MAX_TOKENS,
            native_batching=False,
            languages=self._languages(),
            clone_method="prompt",
            input_kind="text",
            streaming="frame",
            # No duration/pitch/energy/emotion input in the model: all post-processing.
            native_controls=frozenset(),
            style_shape=None,
            speed_range=(1.0, 1.0),
            providers=("torch-cpu",),
            fast_lane=False,
        )

    def tokenizer(self) -> Tokenizer:
        self.load()
        assert self._tokenizer is not None
        return self._tokenizer

    def builtin_voices(self) -> dict[str, EngineVoice]:
        # The package's catalog voices are states downloaded from the hub:
        # none is available offline, so every Pocket voice is a clone.
        return {}

    # -- prompts -----------------------------------------------------------
    def _encode(self, audio: np.ndarray, sample_rate: int) -> Any:
        import torch
        from pocket_tts.data.audio_utils import end_on_pause

        samples = np.asarray(audio, dtype=np.float32).reshape(-1)
        if samples.size == 0 or not np.isfinite(samples).all():
            raise InvalidInput("the reference audio is empty or not finite", field="audio")
        samples = _cut_at_pause(resample(samples, sample_rate, self.sample_rate), self.sample_rate)
        wav = end_on_pause(torch.from_numpy(samples)[None, :], self.sample_rate)
        with self._gen_lock, self._clone_threads(), torch.no_grad():
            latents = self.model.mimi.encode_to_latent(wav[None, :, :])
        return latents.to(torch.float32).contiguous()  # [1, frames, latent_dim]

    @contextlib.contextmanager
    def _clone_threads(self) -> Iterator[None]:
        """Run a clone's one-off passes on ``clone_threads`` cores (caller holds the gen lock).

        Generation may be pinned to fewer threads (``torch_threads``) so that
        concurrent requests share the cores; a clone is one burst that the user
        waits for, so it takes them all. torch's count is process-wide, hence
        the restore.
        """
        import torch

        before = torch.get_num_threads()
        wanted = self._clone_thread_count
        if wanted <= 0 or wanted == before:
            yield
            return
        torch.set_num_threads(wanted)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def make_prompt(self, audio: np.ndarray, sample_rate: int) -> bytes:
        import safetensors.torch

        latents = self._encode(audio, sample_rate)
        meta = {"format": PROMPT_FORMAT, "model": self.capabilities.key}
        blob = bytes(safetensors.torch.save({"latents": latents}, metadata=meta))
        # The caller speaks with this voice next (the clone's test sentence):
        # prompt the LM now so that first synthesis does not pay for it.
        self._remember(self._prompt_from_latents(latents, _digest(blob)))
        return blob

    def load_prompt(self, blob: bytes) -> PocketPrompt:
        digest = _digest(blob)
        with self._prompt_lock:
            cached = self._prompts.get(digest)
            if cached is not None:
                return cached
        latents = self._parse_prompt(blob)
        prompt = self._prompt_from_latents(latents, digest)
        self._remember(prompt)
        return prompt

    def _parse_prompt(self, blob: bytes) -> Any:
        import safetensors
        import safetensors.torch

        try:
            tensors = safetensors.torch.load(bytes(blob))
            meta = _safetensors_metadata(blob)
        except Exception:  # noqa: BLE001 - any parse failure is a bad blob
            raise InvalidInput("this voice's prompt is damaged", field="voice") from None
        if meta.get("format") != PROMPT_FORMAT or "latents" not in tensors:
            raise InvalidInput("this voice was not made by the Pocket TTS engine", field="voice")
        if meta.get("model") != self.capabilities.key:
            raise InvalidInput(
                f"this voice was made with {meta.get('model')}, not {self.capabilities.key}; "
                "clone it again with this model",
                field="voice",
            )
        latents = tensors["latents"]
        if latents.ndim != 3 or latents.shape[-1] != self.model.flow_lm.ldim:
            raise InvalidInput("this voice's prompt does not fit the model", field="voice")
        return latents

    def _prompt_from_latents(self, latents: Any, digest: str) -> PocketPrompt:
        import torch
        import torch.nn.functional as F
        from pocket_tts.modules.stateful_module import init_states

        model = self.model
        with self._gen_lock, self._clone_threads(), torch.no_grad():
            conditioning = F.linear(latents, model.flow_lm.speaker_proj_weight)
            if model.flow_lm.insert_bos_before_voice:
                conditioning = torch.cat([model.flow_lm.bos_before_voice, conditioning], dim=1)
            state = init_states(model.flow_lm, batch_size=1, sequence_length=conditioning.shape[1])
            model._run_flow_lm_and_increment_step(
                model_state=state, audio_conditioning=conditioning
            )
        return PocketPrompt(digest=digest, frames=int(latents.shape[1]), state=state)

    def _remember(self, prompt: PocketPrompt) -> None:
        with self._prompt_lock:
            self._prompts.put(prompt.digest, prompt)

    # -- speech ------------------------------------------------------------
    def synthesize(self, batch: list[SynthItem], *, exclusive: bool = False) -> list[np.ndarray]:
        out = []
        for item in batch:
            pieces = list(self.stream(item))
            out.append(np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32))
        return out

    def stream(
        self, item: SynthItem, *, stop: threading.Event | None = None, exclusive: bool = False
    ) -> Iterator[np.ndarray]:
        """Yield the item's audio piece by piece as the model decodes it (80 ms frames).

        Closing the generator (or setting ``stop``) ends generation at the next frame.
        """
        prompt = item.prompt
        if not isinstance(prompt, PocketPrompt):
            raise InvalidInput(
                "the Pocket TTS engine speaks only with a cloned voice", field="voice"
            )
        if not item.token_ids:
            return
        if len(item.token_ids) > MAX_TOKENS * 4:
            raise InvalidInput(
                f"{len(item.token_ids)} tokens in one call; at most {MAX_TOKENS * 4}",
                field="input",
                limit=MAX_TOKENS * 4,
            )
        if abs(item.speed - 1.0) > 1e-6:
            raise InvalidInput(
                "Pocket TTS has no native speed; apply it after synthesis", field="speed"
            )
        with self._gen_lock:
            yield from self._generate(prompt, item.token_ids, stop or threading.Event())

    def _generate(
        self, prompt: PocketPrompt, ids: tuple[int, ...], stop: threading.Event
    ) -> Iterator[np.ndarray]:
        # The package's generate_audio_stream, fed token ids instead of text
        # (the frontend already cleaned and tokenized the text).
        import torch

        model = self.model
        state = copy.deepcopy(prompt.state)
        prepared = torch.tensor([list(ids)], dtype=torch.long)
        words = len(self.tokenizer_text(ids).split())
        frames_after_eos = model.model_recommended_frames_after_eos
        if frames_after_eos is None:
            frames_after_eos = (3 if words <= 4 else 1) + 2
        max_gen_len = model._estimate_max_gen_len(len(ids))
        steps = int(model.mimi.encoder_frame_rate / model.mimi.frame_rate)
        latents: queue.Queue[Any] = queue.Queue()
        results: queue.Queue[tuple[str, Any]] = queue.Queue()
        decoder = threading.Thread(
            target=model._decode_audio_worker,
            args=(latents, results, max_gen_len * steps, steps),
            daemon=True,
            name="pocket-decoder",
        )
        decoder.start()
        try:
            with torch.no_grad():
                model._generate(
                    model_state=state,
                    prepared=prepared,
                    max_gen_len=max_gen_len,
                    frames_after_eos=frames_after_eos,
                    latents_queue=latents,
                    result_queue=results,
                    stop=stop,
                )
            while True:
                kind, payload = results.get()
                if kind == "chunk":
                    yield payload[0, 0].detach().numpy().astype(np.float32, copy=False)
                elif kind == "done":
                    break
                else:
                    raise ModelAssetError(f"Pocket TTS generation failed: {payload}")
        finally:
            stop.set()  # a consumer that stops early ends the generation thread
            decoder.join(timeout=30)

    def tokenizer_text(self, ids: tuple[int, ...]) -> str:
        tok = self.tokenizer()
        assert isinstance(tok, PocketTokenizer)
        return tok.text_of(ids)


def _cut_at_pause(samples: np.ndarray, rate: int, max_s: float = MAX_PROMPT_S) -> np.ndarray:
    limit = int(max_s * rate)
    if samples.size <= limit:
        return samples
    frame = rate // 50
    start = max(0, limit - 2 * rate) // frame
    frames = samples[start * frame : (limit // frame) * frame].reshape(-1, frame)
    quietest = start + int(np.argmin(np.square(frames, dtype=np.float64).mean(axis=1)))
    return samples[: (quietest + 1) * frame]


def _digest(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def _safetensors_metadata(blob: bytes) -> dict[str, str]:
    import json
    import struct

    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    meta = header.get("__metadata__") or {}
    return {str(k): str(v) for k, v in meta.items()}


def create_engine(models_dir: Path, options: dict[str, str] | None = None) -> PocketEngine:
    """Build the engine from string options (``VOXCLONE_ENGINE_OPTIONS``-style)."""
    opts = dict(options or {})
    try:
        return PocketEngine(
            models_dir,
            bundle=opts.get("bundle") or None,
            torch_threads=int(opts["torch_threads"]) if opts.get("torch_threads") else None,
            frames_per_piece=int(opts.get("frames_per_piece", "0")),
            clone_threads=int(opts["clone_threads"]) if opts.get("clone_threads") else None,
        )
    except ValueError as exc:
        raise BundleError(f"bad Pocket TTS engine option: {exc}") from None
