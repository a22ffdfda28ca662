"""Metrics.observe_render / observe_first_audio_stages: what a render reports."""

from __future__ import annotations

import pytest

from voxclone.runtime.metrics import Metrics


def _sample(m: Metrics, name: str, labels: dict[str, str] | None = None) -> float:
    value = m.registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else value


def test_a_render_adds_its_audio_and_its_real_time_factor() -> None:
    m = Metrics()
    m.observe_render(2.0, 0.5)
    assert _sample(m, "voxclone_audio_seconds_synthesized_total") == pytest.approx(2.0)
    assert _sample(m, "voxclone_real_time_factor_sum") == pytest.approx(0.25)
    assert _sample(m, "voxclone_real_time_factor_count") == 1


def test_a_render_without_audio_has_no_real_time_factor() -> None:
    m = Metrics()
    m.observe_render(0.0, 0.5)
    assert _sample(m, "voxclone_real_time_factor_count") == 0


def test_first_audio_stages_are_observed_by_stage() -> None:
    m = Metrics()
    m.observe_first_audio_stages({"plan": 0.1, "engine": 0.3})
    name = "voxclone_first_audio_stage_seconds_sum"
    assert _sample(m, name, {"stage": "plan"}) == pytest.approx(0.1)
    assert _sample(m, name, {"stage": "engine"}) == pytest.approx(0.3)
