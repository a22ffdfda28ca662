"""Voice blend expressions and the style/tone arithmetic (pure: no engine)."""

from __future__ import annotations

import numpy as np
import pytest

from voxclone.errors import InvalidInput
from voxclone.service.blends import BlendPart, BlendTerm, blend_style, is_blend_id, parse_blend
from voxclone.synth.audio.tone import GRID_HZ, ToneFilter


def test_parse_names_weights_and_defaults() -> None:
    assert parse_blend("clear_female") is None  # not a blend: resolved as a name
    assert parse_blend("alice(2)+clear_male(1)") == [
        BlendTerm("alice", 2.0),
        BlendTerm("clear_male", 1.0),
    ]
    assert parse_blend(" My Voice ( 0.5 ) + clear_male ") == [
        BlendTerm("My Voice", 0.5),
        BlendTerm("clear_male", 1.0),
    ]


@pytest.mark.parametrize(
    "expression",
    ["a+", "+b", "a(0)+b", "a(-1)+b", "a(nan)+b", "a(inf)+b", "a(1e9)+b", "a(x)+b", "a+b+c+d+e"],
)
def test_malformed_blends_are_input_errors(expression: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_blend(expression)
    assert err.value.field == "voice"


def _part(vid: str, value: float, weight: float, **kw: object) -> BlendPart:
    fields: dict[str, object] = {
        "id": vid,
        "version": 3,
        "style": np.full((4, 1, 2), value, np.float32),
        "tone": None,
        "engine": "kokoro",
        "language": "en-us",
        "prompt": None,
        "weight": weight,
    }
    fields.update(kw)
    return BlendPart(**fields)  # type: ignore[arg-type]


def test_styles_mix_by_normalised_weight_and_tones_with_flat_for_none() -> None:
    tone = ToneFilter(np.full(GRID_HZ.shape, 6.0, np.float32))
    style, mixed, blend_id = blend_style(
        [_part("v_a", 1.0, 3.0, tone=tone), _part("clear_male", 0.0, 1.0)]
    )
    assert np.allclose(style, 0.75) and style.dtype == np.float32
    assert mixed is not None and np.allclose(mixed.gain_db, 4.5)
    assert is_blend_id(blend_id) and "v_a@3*0.7500" in blend_id
    _, no_tone, _ = blend_style([_part("a", 1.0, 1.0), _part("b", 0.0, 1.0)])
    assert no_tone is None


def test_prompt_engines_and_mixed_engines_are_refused_clearly() -> None:
    with pytest.raises(InvalidInput, match="reference prompt"):
        blend_style([_part("a", 1, 1, engine="pocket-tts", style=None, prompt=object())] * 2)
    with pytest.raises(InvalidInput, match="one engine"):
        blend_style([_part("a", 1, 1), _part("b", 1, 1, engine="pocket-tts")])
