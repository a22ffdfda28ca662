"""Model assembly from part packages: hash check, repair, concurrent first start."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
from pathlib import Path

import pytest

from voxclone.errors import ModelAssetError
from voxclone.synth.engine.kokoro.assets import MODEL_FILENAME, assemble_model
from voxclone.synth.files import TMP_PREFIX

PARTS = [bytes([i]) * 200_000 for i in range(1, 5)]
GOOD_SHA = hashlib.sha256(b"".join(PARTS)).hexdigest()


def test_assembles_and_verifies(tmp_path: Path) -> None:
    path = assemble_model(tmp_path, parts=PARTS, sha256=GOOD_SHA)
    assert path.name == MODEL_FILENAME
    assert path.read_bytes() == b"".join(PARTS)
    assert not list(tmp_path.glob(f"{TMP_PREFIX}*"))


def test_corrupted_part_is_a_clear_error_and_leaves_nothing(tmp_path: Path) -> None:
    bad = [PARTS[0], PARTS[1][:-1] + b"\x00", PARTS[2], PARTS[3]]
    with pytest.raises(ModelAssetError, match="SHA-256 mismatch"):
        assemble_model(tmp_path, parts=bad, sha256=GOOD_SHA)
    assert not (tmp_path / MODEL_FILENAME).exists()
    assert not list(tmp_path.glob(f"{TMP_PREFIX}*"))


def test_wrong_expected_hash_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelAssetError):
        assemble_model(tmp_path, parts=PARTS, sha256="0" * 64)


def test_damaged_cached_model_is_rebuilt(tmp_path: Path) -> None:
    path = assemble_model(tmp_path, parts=PARTS, sha256=GOOD_SHA)
    path.write_bytes(b"truncated")
    rebuilt = assemble_model(tmp_path, parts=PARTS, sha256=GOOD_SHA, verify_existing=True)
    assert hashlib.sha256(rebuilt.read_bytes()).hexdigest() == GOOD_SHA


def _assemble_in_child(root: str, queue: mp.Queue) -> None:
    try:
        path = assemble_model(Path(root), parts=PARTS, sha256=GOOD_SHA)
        queue.put(hashlib.sha256(path.read_bytes()).hexdigest())
    except Exception as exc:  # report to the parent instead of dying silently
        queue.put(repr(exc))


@pytest.mark.models
def test_shipped_parts_assemble_to_the_published_hash(tmp_path: Path) -> None:
    from voxclone.synth.engine.kokoro.assets import expected_sha256

    path = assemble_model(tmp_path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == expected_sha256()
    assert path.stat().st_size > 80_000_000
