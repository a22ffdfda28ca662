"""The runtime the composition root hands out is complete and frozen: routes
never find a part missing, and nothing attaches one after construction."""

from __future__ import annotations

import dataclasses

import pytest

from voxclone.assembly import Runtime

# None only by configuration (voices, purger: built without cloning; cache: every
# tier off), never because the part is not built yet.
OPTIONAL_BY_CONFIGURATION = {"voices", "purger", "cache"}


def test_every_part_is_built_before_the_runtime(runtime: Runtime) -> None:
    missing = [
        f.name
        for f in dataclasses.fields(runtime)
        if f.name not in OPTIONAL_BY_CONFIGURATION and getattr(runtime, f.name) is None
    ]
    assert missing == []
    # The shared test runtime is built with cloning and the default cache.
    assert runtime.voices is not None and runtime.purger is not None
    assert runtime.cache is not None


def test_a_part_cannot_be_attached_afterwards(runtime: Runtime) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        runtime.voices = None  # type: ignore[misc]
    # A variant is a copy sharing every other part (how tests swap in fakes).
    copy = dataclasses.replace(runtime, voices=None)
    assert copy.voices is None and runtime.voices is not None
    assert copy.speech is runtime.speech and copy.cloning_state == "off"
