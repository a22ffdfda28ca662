"""The engine contract: what a speech model can do and how the rest of
voxclone talks to it.

Everything above ``synth/engine/`` (text frontend, cloning, scheduling,
encoding, the API) talks to an engine only through this module, so a second
model is one subpackage plus one line in :mod:`voxclone.synth.engine.registry`
(recipe: docs/architecture.md, "Extension points").

An engine:

* says what it can do (:class:`EngineCapabilities`);
* says how text enters it (:meth:`Engine.tokenizer`): a phoneme engine
  (Kokoro) turns text into phonemes and phonemes into its vocabulary ids, a
  text engine returns the normalized text unchanged from ``phonemize`` and
  its own tokenizer's ids from ``token_ids``;
* clones in one of two ways (``clone_method``): ``"style"`` engines are
  conditioned on a float style array the cloner computes in the engine's style
  space (:meth:`Engine.cloning` hands over everything model-specific that
  takes: the packs that are the space's basis and, optionally, a measured
  atlas, the pick's fitted tables, the voices a clone is compared with, the
  probe language); ``"prompt"`` engines
  build an opaque conditioning prompt from cleaned reference audio
  (:meth:`Engine.make_prompt`, serialized to bytes for the voice store) and
  load it back for synthesis (:meth:`Engine.load_prompt`);
* ships built-in voices (:meth:`Engine.builtin_voices`);
* turns a batch of :class:`SynthItem` into float32 mono waveforms
  (:meth:`Engine.synthesize`).

:class:`EngineBase` supplies the optional parts' defaults, so an engine
subclasses it and overrides what it supports.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from voxclone.errors import InvalidInput

CloneMethod = Literal["style", "prompt"]
InputKind = Literal["phonemes", "text"]
# "chunk": one synthesize call returns one text chunk's audio (the scheduler
# streams chunk by chunk). "frame": the model itself produces audio frame by
# frame; through the scheduler it is still consumed per chunk today.
StreamGranularity = Literal["chunk", "frame"]
Control = Literal["speed", "pitch", "energy", "emotion"]
ALL_CONTROLS: frozenset[str] = frozenset({"speed", "pitch", "energy", "emotion"})


@dataclass(frozen=True)
class EngineCapabilities:
    """What one loaded engine can do. ``engine`` + ``model_id`` + ``model_version``
    identify the weights: stored voices and cache keys record all three."""

    engine: str  # registry name, e.g. "kokoro"
    model_id: str  # e.g. "kokoro-82m-v1.0-int8"
    model_version: str  # e.g. the first 12 hex digits of the weights' SHA-256
    sample_rate: int
    max_tokens: int  # token ids per call, excluding any boundary tokens the engine adds
    native_batching: bool  # can one call synthesize several items
    languages: tuple[str, ...] = ()
    clone_method: CloneMethod = "style"
    input_kind: InputKind = "phonemes"  # what the engine's tokenizer consumes
    streaming: StreamGranularity = "chunk"
    # Controls the model realises itself (e.g. Kokoro's duration control for
    # ``speed``); the others are post-processing DSP (synth/audio/post.py).
    native_controls: frozenset[str] = frozenset()
    # Shape of a stored style array (style engines); None for prompt engines.
    style_shape: tuple[int, ...] | None = None
    # Range of ``SynthItem.speed`` the engine accepts (1.0 only: no native speed).
    speed_range: tuple[float, float] = (1.0, 1.0)
    providers: tuple[str, ...] = ()
    # The engine can run one call on all cores (``synthesize(..., exclusive=True)``);
    # the scheduler uses it for a stream's first chunk when nothing else runs.
    fast_lane: bool = False
    # On the fast lane, ``stream(..., exclusive=True)`` of a chunk engine yields
    # a head before the rest of the chunk is made: a stream's first chunk goes
    # through it so its first audio leaves sooner.
    head_piece: bool = False
    # The engine fills ``SynthItem.timing`` (per-token times): word timestamps.
    word_timestamps: bool = False

    @property
    def post_controls(self) -> frozenset[str]:
        """Controls voxclone applies after synthesis for this engine."""
        return ALL_CONTROLS - self.native_controls

    @property
    def key(self) -> str:
        """Identity of the weights, for cache keys and voice records."""
        return f"{self.engine}/{self.model_id}@{self.model_version}"


@dataclass
class TokenTiming:
    """Out slot an engine fills when it knows how long each input token lasts.

    ``ends_s[k]`` is where token ``token_ids[k]`` ends in the item's own
    audio (seconds from its first sample), ``starts_s[k]`` where it begins.
    Left empty by engines that cannot tell (callers then have no timestamps).
    """

    starts_s: np.ndarray | None = None
    ends_s: np.ndarray | None = None

    @property
    def filled(self) -> bool:
        return self.starts_s is not None and self.ends_s is not None


@dataclass(frozen=True)
class SynthItem:
    """One model call's worth of input.

    ``token_ids`` come from the same engine's :meth:`Engine.tokenizer`. A style
    engine reads ``style`` ([rows, 1, dims] pack or a single [dims] vector); a
    prompt engine reads ``prompt``, the object its :meth:`Engine.load_prompt`
    returned for the voice.
    """

    token_ids: tuple[int, ...]
    style: np.ndarray | None = field(default=None, repr=False)
    speed: float = 1.0
    prompt: object | None = field(default=None, repr=False)
    # Given when the caller wants word timestamps; the engine fills it.
    timing: TokenTiming | None = field(default=None, repr=False, compare=False)


# OpenAI's voice names by the sex their voices are heard as (OpenAI's API, not
# an engine's): a built-in voice that lists one among its ``aliases`` speaks
# for it in the OpenAI-compatible API (service/catalog.py tells these aliases
# from earlier names). ``marin`` and ``cedar`` are the 2025 voices (OpenAI's
# female and male recommendation for gpt-4o-mini-tts), last so the earlier
# names keep the voices they were measured with.
OPENAI_FEMALE: tuple[str, ...] = (
    "alloy",
    "ballad",
    "coral",
    "fable",
    "nova",
    "sage",
    "shimmer",
    "marin",
)
OPENAI_MALE: tuple[str, ...] = ("ash", "echo", "onyx", "verse", "cedar")
OPENAI_VOICE_NAMES: tuple[str, ...] = OPENAI_FEMALE + OPENAI_MALE


@dataclass(frozen=True)
class EngineVoice:
    """A built-in voice of one engine: a style array or a loaded prompt."""

    name: str
    description: str
    style: np.ndarray | None = field(default=None, repr=False)
    prompt: object | None = field(default=None, repr=False)
    language: str | None = None
    sex: str = "?"
    # Other names that select this voice (earlier names, OpenAI's voice names).
    aliases: tuple[str, ...] = ()
    accent: str | None = None  # what a listener hears, e.g. "British English"
    # Languages that speak with this voice when a request names none.
    default_for: tuple[str, ...] = ()


@dataclass(frozen=True)
class ComparisonVoice:
    """A built-in voice a clone is compared with (the stock check, the quality
    report's closest built-in): its catalog name, sex ("F", "M"; "?": judged by
    its measured F0) and native language (None: unknown)."""

    name: str
    sex: str = "?"
    language: str | None = None


@dataclass(frozen=True)
class StyleCloning:
    """What a style engine gives voxclone's (engine-neutral) cloner.

    Only ``packs`` is required: without ``atlas`` the composition root
    measures an atlas on these packs at the first start (every pack, then
    seeded random blends, each rendered and heard by the speaker encoder;
    cached under models_dir), picks by the encoder alone (no ``pick_weights``,
    no ``cues``) and compares clones with the built-in voices that are one
    pack each (``comparison`` None: :func:`builtin_comparison`).
    """

    # The named style arrays the cloner's style space is built on (each
    # [rows, 1, dims] or [rows, dims], dims even: a timbre half, a prosody half).
    packs: Mapping[str, np.ndarray]
    # A measured atlas in scripts/build_atlas.py's format, over (some of) ``packs``.
    atlas: Path | None = None
    # The pick objective's fitted weights (JSON) and the atlas side of its cues
    # (.npz) for that atlas (synth/voice/pick.py); a missing file means none.
    pick_weights: Path | None = None
    cues: Path | None = None
    # Atlas row label or pack name -> the voice a clone is compared with when
    # the atlas row is that labelled voice or exactly that pack.
    comparison: Mapping[str, ComparisonVoice] | None = None
    # The language the cloner's probe and refinement sentences (English text)
    # are read in; None: "en-us" where the tokenizer has it, else its first.
    probe_language: str | None = None
    # Builds a differentiable (torch) copy of the engine for the deep refine
    # (synth/voice/deep_refine.py: ``decoder_inputs`` / ``decode``); None: the
    # engine has none, or this install lacks what it needs (then
    # ``differentiable_missing`` says what).
    differentiable: Callable[[], object] | None = None
    differentiable_missing: str | None = None


def builtin_comparison(
    voices: Mapping[str, EngineVoice], packs: Mapping[str, np.ndarray]
) -> dict[str, ComparisonVoice]:
    """The built-in voices that are exactly one of ``packs``, keyed by the pack's
    name: the comparison voices of an engine that names none."""
    out: dict[str, ComparisonVoice] = {}
    for voice in voices.values():
        if voice.style is None:
            continue
        for pack_name, pack in packs.items():
            if pack_name not in out and np.array_equal(np.asarray(pack), voice.style):
                out[pack_name] = ComparisonVoice(voice.name, voice.sex, voice.language)
                break
    return out


class Tokenizer(Protocol):
    """How text enters an engine (the text frontend's only view of it)."""

    @property
    def languages(self) -> tuple[str, ...]: ...

    def phonemize(self, text: str, language: str) -> str:
        """The engine's input units for ``text`` (already normalized for speech):
        phonemes for a phoneme engine, the text itself for a text engine."""
        ...

    def token_ids(self, units: str) -> tuple[int, ...]:
        """Ids of ``units`` (what ``phonemize`` returned) in the engine's vocabulary."""
        ...


@runtime_checkable
class Engine(Protocol):
    @property
    def capabilities(self) -> EngineCapabilities: ...

    @property
    def ready(self) -> bool: ...

    @property
    def load_seconds(self) -> float | None: ...

    def load(self) -> None: ...

    def warmup(self) -> None: ...

    def tokenizer(self) -> Tokenizer: ...

    def builtin_voices(self) -> dict[str, EngineVoice]: ...

    def style_packs(self) -> dict[str, np.ndarray]:
        """Style engines: the named style arrays its built-in voices are made of."""
        ...

    def atlas_packs(self) -> dict[str, np.ndarray]:
        """Style engines: the named style arrays the cloner's style space is built
        on (the style packs and any more the engine has that are not voices)."""
        ...

    def cloning(self) -> StyleCloning:
        """Style engines: everything model-specific their cloning needs."""
        ...

    def make_prompt(self, audio: np.ndarray, sample_rate: int) -> bytes:
        """Prompt engines: conditioning for the voice speaking in ``audio``
        (mono float32, already cleaned: trimmed, VAD-checked, normalized),
        serialized for the voice store."""
        ...

    def load_prompt(self, blob: bytes) -> object:
        """Prompt engines: a serialized prompt back in the form ``SynthItem.prompt`` takes."""
        ...

    def synthesize(self, batch: list[SynthItem], *, exclusive: bool = False) -> list[np.ndarray]:
        """Return one mono float32 waveform per item, in order.

        ``exclusive=True``: the caller guarantees no other call runs meanwhile
        (engines without ``fast_lane`` ignore it).
        """
        ...

    def stream(
        self, item: SynthItem, *, stop: threading.Event | None = None, exclusive: bool = False
    ) -> Iterator[np.ndarray]:
        """Yield ``item``'s audio piece by piece as the model makes it: frames for
        ``capabilities.streaming == "frame"``, one whole piece for ``"chunk"``
        (a head and the rest with ``head_piece`` and ``exclusive``, which
        means as in :meth:`synthesize`). Setting ``stop`` (or closing the
        iterator) ends the work at the next piece."""
        ...


class EngineBase:
    """Defaults for the optional parts of :class:`Engine`."""

    load_seconds: float | None = None

    def builtin_voices(self) -> dict[str, EngineVoice]:
        return {}

    def style_packs(self) -> dict[str, np.ndarray]:
        return {}

    def atlas_packs(self) -> dict[str, np.ndarray]:
        return self.style_packs()

    def cloning(self) -> StyleCloning:
        # Packs only: the defaults of StyleCloning's docstring do the rest.
        return StyleCloning(self.atlas_packs())

    def make_prompt(self, audio: np.ndarray, sample_rate: int) -> bytes:
        raise InvalidInput(
            "this engine clones from style vectors, not from a reference prompt", field="model"
        )

    def load_prompt(self, blob: bytes) -> object:
        raise InvalidInput("this engine takes no reference prompt", field="model")

    def synthesize(self, batch: list[SynthItem], *, exclusive: bool = False) -> list[np.ndarray]:
        raise NotImplementedError

    def stream(
        self, item: SynthItem, *, stop: threading.Event | None = None, exclusive: bool = False
    ) -> Iterator[np.ndarray]:
        # A chunk engine makes the item in one call: one piece.
        yield from self.synthesize([item], exclusive=exclusive)


@dataclass(frozen=True)
class EngineConfig:
    """What the composition root tells an engine factory (from Settings)."""

    models_dir: Path  # VOXCLONE_HOME/models: where engines keep weights and caches
    threads: int = 1  # intra-op threads per call
    providers: tuple[str, ...] = ()
    fast_lane_threads: int = 0
    # Engine-specific settings (Settings.engine_options[name]).
    options: dict[str, str] = field(default_factory=dict)
