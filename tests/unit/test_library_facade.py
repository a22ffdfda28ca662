"""The library facade's own checks (issue #45), no model load: load() refuses
settings it cannot work with before building anything, and a closed
:class:`Voxclone` says so instead of waiting on stopped workers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

import voxclone
from voxclone.errors import InvalidInput
from voxclone.library import Closed, Voxclone


@pytest.mark.parametrize(
    ("field", "value"), [("workers", 0), ("workers", -1), ("max_output_s", 0.0)]
)
def test_load_refuses_settings_it_cannot_work_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: float
) -> None:
    # Before: workers=0 loaded, then every synthesize waited forever.
    monkeypatch.setattr("voxclone.library.build_runtime", _no_runtime)
    with pytest.raises(InvalidInput) as caught:
        voxclone.load(tmp_path, **{field: value})
    assert caught.value.field == field
    assert field in caught.value.message


def test_load_names_the_field_of_a_malformed_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("voxclone.library.build_runtime", _no_runtime)
    with pytest.raises(InvalidInput) as caught:
        voxclone.load(tmp_path, workers="many")
    assert caught.value.field == "workers"


def test_calls_after_close_raise_closed() -> None:
    closes: list[int] = []
    runtime = SimpleNamespace(close=lambda: closes.append(1))
    tts = Voxclone(cast(Any, runtime))
    tts.close()
    tts.close()  # a second close does nothing
    assert closes == [1]
    for call in (lambda: tts.synthesize("Hello."), tts.voices, lambda: tts.sample_rate):
        with pytest.raises(Closed, match="closed"):
            call()


def _no_runtime(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("load() must refuse the settings before building a runtime")
