"""A stream's first chunk decoded in two pieces, so its first audio leaves sooner.

Kokoro's time is the vocoder (the decoder's generator: 0.68 s of a 0.94-s call
for a 2.5-s sentence on 2 cores; the text side and the frame-rate part of the
decoder take 0.05 s) and it follows the frame count. The graph is split where
the generator begins:

* ``front``: tokens, style, speed -> the generator's input (the decoder's
  frame-rate stages run on the whole chunk, so their normalization is exact),
  the F0 curve and the per-token frame counts;
* ``generator``: that input, F0 and style -> audio, with the sine source's
  running phase as an extra output and a phase offset as an extra input.

The head piece renders the chunk's first frames (plus a few frames of right
context) and leaves at once; the rest is rendered from a few frames before the
cut with its sine phase carried on, and joins the head through a short
crossfade. Two things keep that seam inaudible:

* phase: without the offset the two renders' harmonics are unrelated where
  they overlap (correlation 0.1 over the 50-ms crossfade); with it, 0.6-0.8;
* level: the generator normalizes over time (instance norm), so a short
  window comes out quieter than the same frames inside the whole chunk: the
  head of 3-word chunks by -4.2 dB (median; -7.9 at worst, 36 chunks x 3
  voices). Silence in the window raises it, so the head's window starts with
  ``SILENT_LEAD_FRAMES`` copies of the chunk's first (silent) frame: -1.3 dB
  (-3.0 at worst) for 0.06 s more (4 frames: -3.0 dB; 12: -0.35 dB for
  0.125 s more). The rest is scaled to the head's level where they meet and
  eased back to its own level over ``EASE_S``, so the level never steps.

Off by default (engine option ``head_piece``): first audio came ~30 % sooner,
but a head's first word was misheard more often (WER 3.3 -> 4.0 % over 40
streams). Figures: ``studies/head_piece.py`` and docs/studies.md ("The head
piece").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from voxclone.synth.engine.kokoro import durations

HOP_SAMPLES = durations.HOP_SAMPLES  # audio samples per frame at 24 kHz
SAMPLE_RATE = 24_000

# Where the generator begins in the Kokoro v1.0 export: the last frame-rate
# block's output [1, 512, 2F], the F0 curve [1, 2F] and the style vector.
GENERATOR_INPUT = "/decoder/decoder/decode.3/Div_4_output_0"
F0_CURVE = "/encoder/Reshape_output_0"
SINE_PHASE = "/decoder/decoder/generator/m_source/l_sin_gen/CumSum_output_0"
PHASE_OFFSET = "phase_offset"  # added input: cycles already run, per harmonic [1, 1, H]
PHASE_OUTPUT = "sine_phase"  # added output: the running phase in cycles [1, 2F, H]

# Right context of the head's window, and left context of the rest's: the
# generator's convolutions see this far across the cut (frames).
CONTEXT_FRAMES = 8
# The crossfade where the two renders meet (frames, centred on the cut).
CROSSFADE_FRAMES = 2
# Silent frames the head's window starts with (their audio is dropped).
SILENT_LEAD_FRAMES = 8
# Below this many frames after the cut the chunk is rendered whole.
MIN_REST_FRAMES = 8
# How many times faster than real time the all-cores lane renders the rest
# (106 frames/s = 2.65x on 2 cores, measured; 2.5 leaves a margin). The head
# is made just long enough that the rest is ready before it has played.
LANE_REALTIME_MULTIPLE = 2.5
# The rest's level is eased from the head's to its own over this long.
EASE_S = 0.3
# The level matching never moves the rest by more than this.
MAX_MATCH_DB = 9.0


# The generator on a window: (features, f0, phase offset) -> (audio, phase).
Generate = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class FrontOutput:
    """What the front gives the generator, for one chunk."""

    features: np.ndarray  # [1, C, 2F]
    f0: np.ndarray  # [1, 2F]
    frames_per_token: np.ndarray  # [T + 2], boundary tokens included

    @property
    def frames(self) -> int:
        return self.f0.shape[1] // 2


def head_frames(frames_per_token: np.ndarray, total: int, lead: int) -> int | None:
    """Where to cut: the first token boundary late enough that the head plays
    while the rest renders; None when too little would be left after it."""
    # Playable head: (cut - lead) frames; rest to render: total - cut + context.
    # (cut - lead) * multiple >= total - cut + context, solved for cut.
    least = (total + CONTEXT_FRAMES + LANE_REALTIME_MULTIPLE * lead) / (
        1.0 + LANE_REALTIME_MULTIPLE
    )
    bounds = np.cumsum(np.asarray(frames_per_token, dtype=np.float64).ravel())
    for bound in bounds:
        cut = int(round(bound))
        if cut >= math.ceil(least):
            return cut if total - cut >= MIN_REST_FRAMES else None
    return None


def _window(
    front: FrontOutput, start: int, stop: int, silent_lead: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Frames [start, stop) in the generator's half-frame columns, after
    ``silent_lead`` copies of the chunk's first frame."""
    columns = np.r_[np.tile([0, 1], silent_lead), np.arange(2 * start, 2 * stop)]
    return front.features[:, :, columns], front.f0[:, columns]


def render_pieces(
    front: FrontOutput,
    generate: Generate,
    cut: int,
) -> Iterator[np.ndarray]:
    """The chunk's audio as a head (frames before the crossfade) and the rest.

    ``generate(features, f0, phase_offset) -> (audio, phase)`` runs the
    generator on a window. Together the pieces are exactly ``frames * 600``
    samples, like the whole chunk rendered at once.
    """
    total = front.frames
    half = CROSSFADE_FRAMES // 2
    zero = np.zeros((1, 1, 1), np.float32)
    head_stop = min(total, cut + CONTEXT_FRAMES)
    head, phase = generate(*_window(front, 0, head_stop, SILENT_LEAD_FRAMES), zero)
    head = head[SILENT_LEAD_FRAMES * HOP_SAMPLES :]
    phase = phase[:, 2 * SILENT_LEAD_FRAMES :, :]
    fade_from, fade_to = (cut - half) * HOP_SAMPLES, (cut + half) * HOP_SAMPLES
    yield head[:fade_from]

    start = cut - CONTEXT_FRAMES
    # Cycles the sine source has run before ``start`` (its whole part does
    # not matter: the generator multiplies by 2*pi times an integer).
    offset = np.mod(phase[:, 2 * start - 1 : 2 * start, :], 1.0).astype(np.float32)
    rest, _ = generate(*_window(front, start, total), offset)
    rest = rest[fade_from - start * HOP_SAMPLES :]
    overlap_head = head[fade_from:fade_to]
    rest = _eased_to(rest, overlap_head, fade_to - fade_from)
    ramp = np.linspace(0.0, 1.0, fade_to - fade_from, dtype=np.float32)
    mixed = overlap_head * (1.0 - ramp) + rest[: ramp.size] * ramp
    yield np.concatenate([mixed, rest[ramp.size :]])


def _eased_to(rest: np.ndarray, head_overlap: np.ndarray, overlap: int) -> np.ndarray:
    """``rest`` scaled to the head's level over their overlap, eased back to
    its own level over ``EASE_S``."""
    head_energy = float(np.mean(np.square(head_overlap, dtype=np.float64)))
    rest_energy = float(np.mean(np.square(rest[:overlap], dtype=np.float64)))
    if head_energy <= 0.0 or rest_energy <= 0.0:
        return rest
    gain_db = float(
        np.clip(10.0 * math.log10(head_energy / rest_energy), -MAX_MATCH_DB, MAX_MATCH_DB)
    )
    ease = int(EASE_S * SAMPLE_RATE)
    fraction = np.clip(1.0 - (np.arange(rest.size) - overlap) / ease, 0.0, 1.0)
    fraction[:overlap] = 1.0
    return (rest * np.power(10.0, gain_db * fraction / 20.0)).astype(np.float32)


def split_model(edited: bytes) -> tuple[bytes, bytes] | None:
    """(front, generator) serialized, from the edited Kokoro graph (durations.py
    and edge_silence.py already applied); None when this export has not the
    expected tensors (then chunks are rendered whole, as before)."""
    import onnx
    from onnx import TensorProto, helper
    from onnx.utils import Extractor

    from voxclone.synth.engine.kokoro.edge_silence import sort_topologically

    model = onnx.load_from_string(edited)
    produced = {out for node in model.graph.node for out in node.output}
    if not {GENERATOR_INPUT, F0_CURVE, SINE_PHASE, durations.DURATION_OUTPUT} <= produced:
        return None
    extractor = Extractor(model)
    front = extractor.extract_model(
        ["tokens", "style", "speed"], [GENERATOR_INPUT, F0_CURVE, durations.DURATION_OUTPUT]
    )
    generator = extractor.extract_model([GENERATOR_INPUT, F0_CURVE, "style"], ["audio"])
    if {i.name for i in generator.graph.input} != {GENERATOR_INPUT, F0_CURVE, "style"}:
        return None
    graph = generator.graph
    shifted = SINE_PHASE + "/shifted"
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name == SINE_PHASE:
                node.input[index] = shifted
    graph.node.append(helper.make_node("Add", [SINE_PHASE, PHASE_OFFSET], [shifted], name=shifted))
    graph.node.append(helper.make_node("Identity", [shifted], [PHASE_OUTPUT], name=PHASE_OUTPUT))
    graph.input.append(
        helper.make_tensor_value_info(PHASE_OFFSET, TensorProto.FLOAT, [1, 1, "harmonics"])
    )
    graph.output.append(helper.make_tensor_value_info(PHASE_OUTPUT, TensorProto.FLOAT, None))
    sort_topologically(graph)
    return front.SerializeToString(), generator.SerializeToString()


class SplitSessions:
    """The front and generator sessions of one lane, run as one chunk or in pieces."""

    def __init__(self, front: Any, generator: Any) -> None:
        self._front = front
        self._generator = generator

    @property
    def sessions(self) -> tuple[Any, Any]:
        """(front, generator): ONNX Runtime sessions."""
        return self._front, self._generator

    def front(self, feeds: dict[str, np.ndarray], options: Any) -> FrontOutput:
        features, f0, frames = self._front.run(
            [GENERATOR_INPUT, F0_CURVE, durations.DURATION_OUTPUT], feeds, options
        )
        return FrontOutput(features, f0, np.asarray(frames).ravel())

    def generator(self, style: np.ndarray, options: Any) -> Generate:
        def generate(
            features: np.ndarray, f0: np.ndarray, offset: np.ndarray
        ) -> tuple[np.ndarray, np.ndarray]:
            # [1, 1, 1] broadcasts over the harmonics (the head starts at 0).
            audio, phase = self._generator.run(
                ["audio", PHASE_OUTPUT],
                {GENERATOR_INPUT: features, F0_CURVE: f0, "style": style, PHASE_OFFSET: offset},
                options,
            )
            return np.asarray(audio, np.float32).ravel(), np.asarray(phase)

        return generate
