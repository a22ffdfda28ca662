"""A differentiable PyTorch copy of Kokoro, built from the shipped int8 ONNX model.

For enrollment-time optimisation only (issue 47: descend on a style vector
through the model); serving keeps running the ONNX int8 graph and never imports
this module (torch is not in the serving install).

The model code is hexgrad's published classes (PyPI ``kokoro==0.9.4``,
Apache-2.0: ``KModel``, ``istftnet``, ``modules``) with

* a local config (``KOKORO_CONFIG``: the published Kokoro-82M v1.0
  hyper-parameters, each checked against the ONNX file's initializer shapes and
  graph attributes by :func:`verify_config`), never the hub's config.json;
* the weights dequantized from the ONNX initializers
  (``(q - zero_point) * scale``) and mapped to ``KModel``'s parameter names;
  the exporter kept most names (``decoder.decoder.generator.resblocks.4.adain1.0
  .fc.weight_quantized``) and left the rest anonymous (``onnx::MatMul_6547``,
  weight-norm products ``/encoder/text_encoder/cnn.0/Mul_output_0``): those
  are named by the node that consumes them (``/encoder/bert/encoder/
  embedding_hidden_mapping_in/MatMul_quant`` -> ``bert.encoder.
  embedding_hidden_mapping_in``);
* one hand-written part: the harmonic source without its random phase and
  noise (:class:`_ExportedSineGen`), as the ONNX export computes it (the graph
  has no random op), so the copy renders what the engine renders.

``import kokoro`` would run the package's ``__init__``, which imports its G2P
pipeline (misaki's English frontend: spacy, num2words, none installed here);
:func:`_kokoro_model_module` imports only ``kokoro.model`` (which needs torch,
transformers' ``AlbertModel``, loguru and huggingface_hub, the last never
called: ``KModel`` gets a dict config and an empty state dict).
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import re
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from voxclone.errors import ModelAssetError

if TYPE_CHECKING:  # pragma: no cover
    import onnx
    import torch

# The model code's release and what it needs beyond torch; `make test-deps`
# installs the code with --no-deps (its declared misaki[en] pulls spacy).
KOKORO_CODE = "kokoro==0.9.4"
INSTALL_HINT = (
    "install the [deep] extra (`pip install -e '.[deep]'`) and "
    f"`pip install --no-deps {KOKORO_CODE}`"
)

# Kokoro-82M v1.0's hyper-parameters (hexgrad/Kokoro-82M config.json, less the
# vocabulary, which comes from the engine's shipped vocab.json). verify_config
# checks each one the ONNX file determines.
KOKORO_CONFIG: dict[str, Any] = {
    "n_token": 178,
    "hidden_dim": 512,
    "style_dim": 128,
    "n_layer": 3,
    "max_dur": 50,
    "dropout": 0.2,
    "text_encoder_kernel_size": 5,
    "n_mels": 80,  # Decoder's dim_out: the class takes it and uses no layer of that size
    "plbert": {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "intermediate_size": 2048,
        "max_position_embeddings": 512,
        "num_hidden_layers": 12,
        "dropout": 0.1,
    },
    "istftnet": {
        "upsample_kernel_sizes": [20, 12],
        "upsample_rates": [10, 6],
        "gen_istft_hop_size": 5,
        "gen_istft_n_fft": 20,
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "resblock_kernel_sizes": [3, 7, 11],
        "upsample_initial_channel": 512,
    },
}

SAMPLE_RATE = 24_000
TIMBRE_DIMS = slice(0, 128)  # style[:128] drives the decoder (AdaIN): the timbre half
PROSODY_DIMS = slice(128, 256)  # style[128:] drives durations, F0 and energy

# LSTM gates: ONNX orders them i, o, f, c; torch i, f, c(g), o.
_ONNX_TO_TORCH_GATES = (0, 2, 3, 1)
_QUANT_OPS = ("MatMulInteger", "ConvInteger", "DynamicQuantizeLSTM")
# KModel tensors the ONNX file cannot hold, left as constructed: AdaIN1d's
# InstanceNorm affine pair (140 tensors; created affine=True only so the old
# exporter kept the channel dimension, kokoro's own comment says, so weight 1
# and bias 0, which is what construction gives) and ALBERT's pooler (2; KModel
# reads last_hidden_state, so the export dropped it).
_UNEXPORTED = re.compile(r"(\.norm\.(weight|bias)$)|(^bert\.pooler\.)")


@dataclass
class LoadReport:
    """How the ONNX initializers became the torch state dict."""

    mapped: int = 0  # torch tensors filled from the ONNX file
    torch_tensors: int = 0  # tensors in KModel's state dict
    unmapped_torch: list[str] = field(default_factory=list)
    unused_onnx: list[str] = field(default_factory=list)  # weights of no torch tensor
    seconds: float = 0.0


@dataclass
class Render:
    audio: torch.Tensor  # [samples] float32, 24 kHz
    frames: torch.Tensor  # frames per token, boundary tokens included (600 samples each)


@dataclass
class DecoderInputs:
    """The decoder's inputs for one sentence, before the timbre half."""

    asr: torch.Tensor  # text features on the frame grid [1, 512, frames]
    f0: torch.Tensor  # predicted pitch curve [1, 2 * frames]
    energy: torch.Tensor  # predicted energy curve [1, 2 * frames]
    frames: torch.Tensor  # frames per token, boundary tokens included


class TorchKokoro:
    """The copy: ``render(tokens, style, speed)`` keeps the graph for backward."""

    def __init__(self, model: torch.nn.Module, report: LoadReport) -> None:
        self.model = model
        self.report = report

    def render(
        self,
        tokens: list[int] | tuple[int, ...],
        style: torch.Tensor,
        speed: float = 1.0,
        *,
        frames: torch.Tensor | None = None,
    ) -> Render:
        """Tokens without the boundary ids (added here, as the engine does);
        ``style`` [256] or [1, 256], float32, may require grad. ``frames``
        (per token, boundary tokens included) replaces the predicted durations:
        renders of two styles then align frame by frame, and the copy can
        follow the durations the ONNX engine chose.

        KModel.forward_with_tokens's steps (it runs under no_grad and always
        predicts the durations), for one unpadded sequence."""
        inputs = self.decoder_inputs(tokens, style, speed, frames=frames)
        return Render(
            audio=self.decode(inputs, style.reshape(-1)[TIMBRE_DIMS]), frames=inputs.frames
        )

    def decoder_inputs(
        self,
        tokens: list[int] | tuple[int, ...],
        style: torch.Tensor,
        speed: float = 1.0,
        *,
        frames: torch.Tensor | None = None,
    ) -> DecoderInputs:
        """Everything before the decoder: it depends on the tokens and the
        style's prosody half only, so a search over the timbre half computes it
        once per sentence (with grad where ``style`` requires it)."""
        import torch

        m: Any = self.model
        ids = torch.tensor([[0, *tokens, 0]], dtype=torch.long)
        n = ids.shape[1]
        ref = style.reshape(1, -1).to(torch.float32)
        lengths = torch.tensor([n], dtype=torch.long)
        mask = torch.zeros((1, n), dtype=torch.bool)  # nothing padded
        bert = m.bert(ids, attention_mask=(~mask).int())
        d_en = m.bert_encoder(bert).transpose(-1, -2)
        prosody = ref[:, PROSODY_DIMS]
        d = m.predictor.text_encoder(d_en, prosody, lengths, mask)
        if frames is None:
            x, _ = m.predictor.lstm(d)
            duration = torch.sigmoid(m.predictor.duration_proj(x)).sum(dim=-1) / speed
            frames = torch.round(duration).clamp(min=1).long().reshape(-1)
        frames = frames.detach().long().reshape(-1)
        index = torch.repeat_interleave(torch.arange(n), frames)
        alignment = torch.zeros((n, index.shape[0]))
        alignment[index, torch.arange(index.shape[0])] = 1
        alignment = alignment.unsqueeze(0)
        en = d.transpose(-1, -2) @ alignment
        f0, energy = m.predictor.F0Ntrain(en, prosody)
        asr = m.text_encoder(ids, lengths, mask) @ alignment
        return DecoderInputs(asr=asr, f0=f0, energy=energy, frames=frames)

    def decode(self, inputs: DecoderInputs, timbre: torch.Tensor) -> torch.Tensor:
        """[samples] audio from :meth:`decoder_inputs` and a [128] timbre half."""
        m: Any = self.model
        audio = m.decoder(inputs.asr, inputs.f0, inputs.energy, timbre.reshape(1, -1))
        return audio.reshape(-1)


def _kokoro_model_module() -> types.ModuleType:
    """``kokoro.model`` without running ``kokoro/__init__`` (see the module doc)."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise ModelAssetError(f"the differentiable Kokoro needs torch: {INSTALL_HINT}") from exc
    if "kokoro" not in sys.modules:
        spec = importlib.util.find_spec("kokoro")  # locates the package, runs nothing
        if spec is None or not spec.submodule_search_locations:
            raise ModelAssetError(f"Kokoro's model code is not installed: {INSTALL_HINT}")
        package = types.ModuleType("kokoro")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["kokoro"] = package
    try:
        return importlib.import_module("kokoro.model")
    except ImportError as exc:
        raise ModelAssetError(
            f"Kokoro's model code could not be imported ({exc}): {INSTALL_HINT}"
        ) from exc


def _exported_sine_gen(base: type) -> type:
    class _ExportedSineGen(base):  # type: ignore[misc, valid-type]
        """SineGen as exported: no random initial phase, no additive noise."""

        def forward(self, f0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            import torch
            import torch.nn.functional as F  # noqa: N812

            harmonics = torch.arange(1, self.harmonic_num + 2, dtype=f0.dtype, device=f0.device)
            rad = (f0 * harmonics / self.sampling_rate) % 1
            rad = F.interpolate(
                rad.transpose(1, 2), scale_factor=1 / self.upsample_scale, mode="linear"
            ).transpose(1, 2)
            phase = torch.cumsum(rad, dim=1) * 2 * torch.pi
            phase = F.interpolate(
                phase.transpose(1, 2) * self.upsample_scale,
                scale_factor=self.upsample_scale,
                mode="linear",
            ).transpose(1, 2)
            uv = self._f02uv(f0)
            return torch.sin(phase) * self.sine_amp * uv, uv, torch.zeros_like(uv)

    return _ExportedSineGen


# -- reading the ONNX file ----------------------------------------------------
class _Graph:
    """Initializers and their consumers."""

    def __init__(self, model: onnx.ModelProto) -> None:
        from onnx import numpy_helper

        self.model = model
        self.arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        self.consumers: dict[str, list[Any]] = {}
        for node in model.graph.node:
            for name in node.input:
                if name in self.arrays:
                    self.consumers.setdefault(name, []).append(node)

    def dequantized(self, base: str, node: Any) -> np.ndarray:
        """``base``_quantized as float32: (q - zero point) * scale, per tensor
        or per channel (the output channel of a conv, the column of a matmul,
        the direction of an LSTM)."""
        q = self.arrays[base + "_quantized"].astype(np.float32)
        scale = self.arrays[base + "_scale"].astype(np.float32)
        zp_name = base + "_zero_point"
        if zp_name not in self.arrays:  # shared zero points: the consumer names it
            zp_name = _zero_point_input(node, base)
        zero = self.arrays[zp_name].astype(np.float32) if zp_name else np.zeros((), np.float32)
        axis = q.ndim - 1 if node.op_type == "MatMulInteger" else 0
        shape = [1] * q.ndim
        if scale.ndim:
            shape[axis] = scale.size
        return ((q - zero.reshape(shape if zero.ndim else ())) * scale.reshape(shape)).astype(
            np.float32
        )


def _zero_point_input(node: Any, base: str) -> str:
    inputs = list(node.input)
    quantized = base + "_quantized"
    if node.op_type in ("MatMulInteger", "ConvInteger") and len(inputs) > 3:
        return str(inputs[3])
    if node.op_type == "DynamicQuantizeLSTM":
        return str(inputs[9] if inputs[1] == quantized else inputs[11])
    return ""


def _module_path(node_name: str) -> str:
    """'/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant' -> 'text_encoder.cnn.0.0'.

    The exporter's scopes repeat a container's prefix ('cnn.0' then 'cnn.0.0')
    and wrap the model in 'encoder' / 'decoder' (dropped)."""
    parts = [p for p in node_name.split("/") if p][1:-1]
    path: list[str] = []
    for part in parts:
        if path and part.startswith(path[-1] + "."):
            path[-1] = part
        else:
            path.append(part)
    return ".".join(path)


def _resolve(root: torch.nn.Module, path: str) -> tuple[str, torch.nn.Module] | None:
    """The module at ``path`` (or under ``predictor.``: the export inlined
    F0, N and shared into the encoder scope)."""
    for candidate in (path, f"predictor.{path}"):
        try:
            return candidate, root.get_submodule(candidate)
        except AttributeError:
            continue
    return None


def _torch_name(onnx_name: str) -> str:
    """'decoder.decoder.generator.x' -> 'decoder.generator.x', 'encoder.bert.x' -> 'bert.x'."""
    return onnx_name.split(".", 1)[1]


def _set_weight(
    state: dict[str, np.ndarray], prefix: str, module: Any, weight: np.ndarray
) -> list[str]:
    """A weight-normed layer gets v = W and g = |W| (so g * v / |v| is W exactly)."""
    if hasattr(module, "parametrizations") or hasattr(module, "weight_v"):
        g_key, v_key = (
            (
                f"{prefix}.parametrizations.weight.original0",
                f"{prefix}.parametrizations.weight.original1",
            )
            if hasattr(module, "parametrizations")
            else (f"{prefix}.weight_g", f"{prefix}.weight_v")
        )
        norm = np.sqrt(
            (weight.astype(np.float64) ** 2).sum(axis=tuple(range(1, weight.ndim)), keepdims=True)
        )
        # A channel int8 rounded to all zeros would make g * v / |v| = 0 / 0:
        # give it v = 1 (and g = 0), which renders the same zeros.
        dead = np.broadcast_to(norm == 0, weight.shape)
        state[g_key] = norm.astype(np.float32)
        state[v_key] = np.where(dead, np.float32(1), weight).astype(np.float32)
        return [g_key, v_key]
    state[f"{prefix}.weight"] = weight
    return [f"{prefix}.weight"]


def _lstm(state: dict[str, np.ndarray], prefix: str, graph: _Graph, node: Any) -> list[str]:
    w_base = node.input[1].removesuffix("_quantized")
    r_base = node.input[2].removesuffix("_quantized")
    w = graph.dequantized(w_base, node)  # [dirs, in, 4H]
    r = graph.dequantized(r_base, node)  # [dirs, H, 4H]
    b = graph.arrays[node.input[3]]  # [dirs, 8H]
    keys = []
    for d, suffix in enumerate(("", "_reverse")):
        for key, value in (
            (f"weight_ih_l0{suffix}", w[d].T),
            (f"weight_hh_l0{suffix}", r[d].T),
            (f"bias_ih_l0{suffix}", b[d, : b.shape[1] // 2]),
            (f"bias_hh_l0{suffix}", b[d, b.shape[1] // 2 :]),
        ):
            gates = np.split(np.ascontiguousarray(value), 4, axis=0)
            state[f"{prefix}.{key}"] = np.concatenate([gates[i] for i in _ONNX_TO_TORCH_GATES])
            keys.append(f"{prefix}.{key}")
    return keys


def onnx_state_dict(
    model: torch.nn.Module, graph: _Graph
) -> tuple[dict[str, np.ndarray], LoadReport]:
    """KModel's tensors from the ONNX initializers, and what mapped."""
    state: dict[str, np.ndarray] = {}
    used: set[str] = set()
    wanted = model.state_dict()
    for name, array in graph.arrays.items():
        nodes = graph.consumers.get(name, [])
        if name.endswith(("_scale", "_zero_point")) or not nodes:
            continue
        node = nodes[0]
        base = name.removesuffix("_quantized")
        if node.op_type == "DynamicQuantizeLSTM":
            if name == node.input[1]:
                found = _resolve(model, _module_path(node.name))
                if found:
                    _lstm(state, found[0], graph, node)
                    used.update({name, node.input[2], node.input[3]})
            continue
        weight = graph.dequantized(base, node) if name.endswith("_quantized") else array
        if node.op_type in ("MatMulInteger", "MatMul"):
            weight = weight.T  # a Linear's weight is [out, in]; the graph's [in, out]
        target = _torch_name(base) if "." in base and not base.startswith(("/", "onnx::")) else ""
        if target and target in wanted:
            state[target] = np.ascontiguousarray(weight).reshape(wanted[target].shape)
            used.add(name)
            continue
        if target and f"predictor.{target}" in wanted:
            state[f"predictor.{target}"] = np.ascontiguousarray(weight)
            used.add(name)
            continue
        if target.endswith(".weight"):  # a named weight of a weight-normed layer
            found = _resolve(model, target.removesuffix(".weight"))
        elif node.op_type in (*_QUANT_OPS, "MatMul", "Conv", "ConvTranspose") and not target:
            found = _resolve(model, _module_path(node.name))
        else:
            found = None
        if found and list(node.input).index(name) == 1:
            _set_weight(state, found[0], found[1], np.ascontiguousarray(weight))
            used.add(name)
    report = LoadReport(torch_tensors=len(wanted))
    report.mapped = sum(1 for k in wanted if k in state)
    report.unmapped_torch = sorted(k for k in wanted if k not in state)
    report.unused_onnx = sorted(
        n
        for n, a in graph.arrays.items()
        if n not in used
        and a.size > 1
        and not n.endswith(("_scale", "_zero_point"))
        and graph.consumers.get(n)
        and a.dtype != np.int64
    )
    return state, report


# -- the config, checked against the file ---------------------------------------
def verify_config(graph: _Graph, vocab: dict[str, int]) -> None:
    """Every hyper-parameter the ONNX file determines, against KOKORO_CONFIG."""
    a = graph.arrays
    c, bert, net = KOKORO_CONFIG, KOKORO_CONFIG["plbert"], KOKORO_CONFIG["istftnet"]
    nodes = {n.name: n for n in graph.model.graph.node}

    def shape(name: str) -> tuple[int, ...]:
        return tuple(a[name].shape)

    def attr(node_name: str, key: str) -> list[int]:
        from onnx import helper

        node = nodes[node_name]
        return [
            int(v)
            for v in helper.get_attribute_value(next(x for x in node.attribute if x.name == key))
        ]

    def weight_of(node_name: str) -> tuple[int, ...]:
        return shape(nodes[node_name].input[1])

    gen = "/decoder/decoder/generator"
    layer = "/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0"
    # Not checked here: plbert.num_attention_heads (the graph takes the head
    # split from runtime shapes, no initializer holds it; the parity test
    # would fail with any other value) and dropout (inactive in eval mode).
    queries = [n for n in nodes if re.fullmatch(rf"{layer}/attention/query(_\d+)?/MatMul_quant", n)]
    checks: dict[str, tuple[object, object]] = {
        "n_token": (
            c["n_token"],
            shape("encoder.bert.embeddings.word_embeddings.weight_quantized")[0],
        ),
        "vocab ids < n_token": (True, max(vocab.values()) < c["n_token"]),
        "hidden_dim": (c["hidden_dim"], shape("encoder.bert_encoder.bias")[0]),
        "style_dim": (c["style_dim"], shape("decoder.decoder.encode.norm1.fc.weight_quantized")[0]),
        "n_layer": (
            c["n_layer"],
            sum(
                1
                for n in nodes
                if re.fullmatch(r"/encoder/predictor/text_encoder/lstms\.\d+/LSTM_quant", n)
            ),
        ),
        "max_dur": (c["max_dur"], shape("encoder.predictor.duration_proj.linear_layer.bias")[0]),
        "text_encoder_kernel_size": (
            c["text_encoder_kernel_size"],
            weight_of("/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant")[2],
        ),
        "plbert.hidden_size": (
            bert["hidden_size"],
            shape("encoder.bert.encoder.embedding_hidden_mapping_in.bias")[0],
        ),
        "plbert.intermediate_size": (
            bert["intermediate_size"],
            shape("encoder.bert.encoder.albert_layer_groups.0.albert_layers.0.ffn.bias")[0],
        ),
        "plbert.max_position_embeddings": (
            bert["max_position_embeddings"],
            shape("encoder.bert.embeddings.position_embeddings.weight_quantized")[0],
        ),
        "plbert.num_hidden_layers": (bert["num_hidden_layers"], len(queries)),
        "upsample_initial_channel": (
            net["upsample_initial_channel"],
            shape(f"{gen}/Mul_output_0")[0],
        ),
        "upsample_kernel_sizes": (
            net["upsample_kernel_sizes"],
            [shape(f"{gen}/Mul_output_0")[2], shape(f"{gen}/Mul_1_output_0")[2]],
        ),
        "upsample_rates": (
            net["upsample_rates"],
            [attr(f"{gen}/ups.{i}/ConvTranspose", "strides")[0] for i in (0, 1)],
        ),
        "resblock_kernel_sizes": (
            net["resblock_kernel_sizes"],
            [weight_of(f"{gen}/resblocks.{i}/convs1.0/Conv_quant")[2] for i in range(3)],
        ),
        "resblock_dilation_sizes": (
            net["resblock_dilation_sizes"],
            [
                [
                    attr(f"{gen}/resblocks.{i}/convs1.{j}/Conv_quant", "dilations")[0]
                    for j in range(3)
                ]
                for i in range(3)
            ],
        ),
        "gen_istft_n_fft": (
            net["gen_istft_n_fft"],
            shape("decoder.decoder.generator.conv_post.bias")[0] - 2,
        ),
        # the F0 curve is upsampled by prod(upsample_rates) * hop to the sample rate
        "gen_istft_hop_size": (
            net["gen_istft_hop_size"],
            round(
                float(a[f"{gen}/f0_upsamp/Constant_output_0"][-1])
                / float(np.prod(net["upsample_rates"]))
            ),
        ),
    }
    wrong = {k: v for k, v in checks.items() if v[0] != v[1]}
    if wrong:
        raise ModelAssetError(
            "the Kokoro ONNX file does not match the torch copy's config: "
            + ", ".join(f"{k} config {v[0]} file {v[1]}" for k, v in wrong.items())
        )


def build_torch_kokoro(model_path: Path, vocab: dict[str, int]) -> TorchKokoro:
    """The copy of the model at ``model_path`` (the engine's assembled
    kokoro-v1.0.int8.onnx), in eval mode, float32, on the CPU.

    Raises ModelAssetError naming the install when torch or the model code is
    missing, and when the file does not match the config or leaves a tensor
    unmapped."""
    import time

    started = time.perf_counter()
    kmodel = _kokoro_model_module()
    import onnx
    import torch

    graph = _Graph(onnx.load(str(model_path)))
    verify_config(graph, vocab)
    empty = io.BytesIO()
    torch.save({}, empty)  # KModel loads weights from this: nothing, and no hub
    empty.seek(0)
    config = {**KOKORO_CONFIG, "vocab": dict(vocab)}
    model = kmodel.KModel(repo_id="hexgrad/Kokoro-82M", config=config, model=empty)
    generator = model.decoder.generator
    old = generator.m_source.l_sin_gen
    generator.m_source.l_sin_gen = _exported_sine_gen(type(old))(
        old.sampling_rate,
        old.upsample_scale,
        old.harmonic_num,
        old.sine_amp,
        old.noise_std,
        old.voiced_threshold,
    )
    state, report = onnx_state_dict(model, graph)
    del graph
    missing = [k for k in report.unmapped_torch if not _UNEXPORTED.search(k)]
    if missing:
        raise ModelAssetError(
            f"{len(missing)} tensors of the torch copy found no ONNX weight: "
            + ", ".join(missing[:8])
        )
    # strict=False: the _UNEXPORTED tensors keep their construction values
    model.load_state_dict(
        {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in state.items()}, strict=False
    )
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)  # the style is what moves, never the weights
    report.seconds = time.perf_counter() - started
    return TorchKokoro(model, report)
