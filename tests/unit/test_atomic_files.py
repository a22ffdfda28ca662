"""The one atomic file writer (synth/files.py) that the stores and model loaders share."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from voxclone.synth.files import TMP_PREFIX, atomic_writer, write_atomically


def test_replaces_the_whole_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "entry.bin"
    target.write_bytes(b"old")
    assert write_atomically(target, b"new contents")
    assert target.read_bytes() == b"new contents"
    assert [p.name for p in tmp_path.iterdir()] == ["entry.bin"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # private unless asked otherwise


def test_a_failure_inside_the_block_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    target.write_bytes(b"good")
    with pytest.raises(ValueError), atomic_writer(target) as out:
        out.write(b"half of a new fi")
        raise ValueError("checksum mismatch")
    assert target.read_bytes() == b"good"
    assert not list(tmp_path.glob(f"{TMP_PREFIX}*"))


def test_exclusive_lets_the_first_writer_win(tmp_path: Path) -> None:
    target = tmp_path / "secret.key"
    assert write_atomically(target, b"first", exclusive=True)
    assert not write_atomically(target, b"second", exclusive=True)
    assert target.read_bytes() == b"first"
    assert not list(tmp_path.glob(f"{TMP_PREFIX}*"))
